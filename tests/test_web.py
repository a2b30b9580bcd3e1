"""`steer web` end to end: the real command serving the real app through textual-serve on
127.0.0.1, a real headless Chromium (Debian's, driven by playwright) typing into it, a real
loopback model server streaming the answer. Requests without the token are refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from app.bench.demo import CALC_ANSWER
from app.core.storage.records import End, Text, TurnRec
from app.core.storage.store import SessionStore
from app.server.chat_server import ServerThread

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HERE = Path(__file__).resolve().parents[1]
SHOTS = HERE / "screenshots"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def start_web(demo: Path, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(HERE), "EDITOR": "", "VISUAL": ""}
    proc = subprocess.Popen([sys.executable, "-m", "app", "web", str(demo), "--port", "0", *extra],
                            stdout=subprocess.PIPE, stderr=open(tmp_path / "web.err", "wb"),
                            text=True, env=env, start_new_session=True, cwd=demo)
    line = proc.stdout.readline()
    assert "http://127.0.0.1:" in line and "?token=" in line, line
    return proc, line.rsplit(" ", 1)[-1].strip()


def stop(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def test_a_request_without_the_token_is_refused(demo, tmp_path):
    proc, url = start_web(demo, tmp_path)
    try:
        base = url.split("?", 1)[0]
        for bad in (base, base + "?token=nope", base + "static/js/textual.js", base + "ws"):
            r = httpx.get(bad, timeout=10)
            assert r.status_code == 403, bad
            assert "token" in r.text
        ok = httpx.get(url, timeout=10)
        assert ok.status_code == 200 and "textual.js" in ok.text
        # the page's own script and socket: the cookie set with the page carries the token
        js = httpx.get(base + "static/js/textual.js", cookies=ok.cookies, timeout=10)
        assert js.status_code == 200
        # another site's page cannot open the session's socket, even with the cookie
        r = httpx.get(base + "ws", cookies=ok.cookies, timeout=10,
                      headers={"Origin": "http://evil.example", "Connection": "Upgrade",
                               "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert r.status_code == 403
    finally:
        stop(proc)


def test_it_listens_on_loopback_only_unless_told(demo, tmp_path):
    proc, url = start_web(demo, tmp_path)
    try:
        port = int(url.split(":")[2].split("/")[0])
        if shutil.which("ss") is None:
            pytest.skip("ss is not installed")
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                             text=True).stdout
        assert [line.split()[3] for line in out.splitlines()] == [f"127.0.0.1:{port}"]
    finally:
        stop(proc)


@pytest.mark.parametrize("host,warned", [("0.0.0.0", True), ("127.0.0.1", False)])
def test_another_interface_than_loopback_is_named_as_an_exposure(demo, tmp_path, host, warned):
    proc, _ = start_web(demo, tmp_path, "--host", host)
    stop(proc)
    err = (tmp_path / "web.err").read_text()
    assert ("steer web: listening on 0.0.0.0: other machines can reach this session" in err) \
        is warned, err
    if warned:
        assert "token" in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")
def test_the_app_runs_in_a_browser_tab_keys_reach_it_and_the_answer_streams(demo, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    rig = ServerThread(replay=CALC_ANSWER, rate=300)
    server = rig.__enter__()
    proc, url = start_web(demo, tmp_path, "--base-url", server.base_url, "--model", "replay",
                          "-f", "calc.py")
    store = SessionStore(demo)
    try:
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS,
                                         headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            page.wait_for_selector("canvas", timeout=30_000)
            _wait(lambda: store.ids(), 30, "the tab's app never saved its session")
            sid = store.ids()[0]
            time.sleep(3)  # the app paints its first frame
            page.mouse.click(300, 852)  # on the prompt: the terminal takes the keyboard
            page.keyboard.type("add type hints")
            page.keyboard.press("Enter")
            # the keys reached the app: it sent the request, and the answer streamed into it
            _wait(lambda: any(type(r) is End for r in store.load(sid)), 60,
                  "the answer never finished streaming in the tab")
            records = store.load(sid)
            turn = next(r for r in records if type(r) is TurnRec)
            assert turn.instruction == "add type hints"
            assert "".join(r.s for r in records if type(r) is Text) == CALC_ANSWER
            time.sleep(1.5)  # the last frames reach the page
            # the README's screenshot only on purpose (`make screenshots`): a test run
            # leaves the working tree as it found it
            keep = os.environ.get("STEER_WRITE_SCREENSHOTS") == "1"
            shot = SHOTS / "web.png" if keep else tmp_path / "web.png"
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 20_000  # a painted terminal, not a blank page
            browser.close()
    finally:
        stop(proc)
        rig.__exit__(None, None, None)
    info = json.loads(store.log_path(sid).with_suffix(".json").read_text())
    assert info["turns"] == 1 and info["open"] == 3


def _wait(cond, timeout: float, why: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(why)
        time.sleep(0.2)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")
def test_the_page_makes_no_request_off_loopback_and_the_terminal_renders(demo, tmp_path):
    """A local tool never calls out: every request the page makes (its script, styles, font,
    socket) goes to 127.0.0.1. textual-serve's own page loads Roboto Mono from Google Fonts;
    ours serves the font textual-serve ships, from the same loopback address."""
    playwright = pytest.importorskip("playwright.sync_api")
    rig = ServerThread(replay=CALC_ANSWER, rate=300)
    server = rig.__enter__()
    proc, url = start_web(demo, tmp_path, "--base-url", server.base_url, "--model", "replay")
    requested: list[str] = []
    try:
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("request", lambda r: requested.append(r.url))
            page.on("websocket", lambda ws: requested.append(ws.url))
            page.goto(url)
            page.wait_for_selector("canvas", timeout=30_000)
            page.wait_for_function("document.body.classList.contains('-first-byte')",
                                   timeout=30_000)  # the app's output reached the terminal
            time.sleep(3)  # the app paints its first frames
            # the terminal's font is loaded (from loopback), not a fallback
            loaded = page.evaluate("[...document.fonts].filter(f => f.status === 'loaded')"
                                   ".map(f => f.family.replace(/[\"']/g, ''))")
            assert "Roboto Mono" in loaded, loaded
            shot = tmp_path / "web.png"
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 20_000  # a painted terminal, not a blank page
            browser.close()
    finally:
        stop(proc)
        rig.__exit__(None, None, None)
    hosts = sorted({urlsplit(u).hostname or u for u in requested})
    print("requested:", hosts, sorted({urlsplit(u)._replace(query="").geturl() for u in requested}))
    assert any(urlsplit(u).scheme == "ws" for u in requested)  # the terminal's socket was seen
    assert hosts == ["127.0.0.1"], [u for u in requested if urlsplit(u).hostname != "127.0.0.1"]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")
def test_a_reloaded_tab_resumes_its_session(demo, tmp_path):
    """A reload ends the tab's steer process and starts another on the same session: the
    conversation and the pending review come back from the log. The second instruction,
    typed in the reloaded tab, goes to the model with the first turn in its history, into
    the same session, with the first answer's hunks still open."""
    playwright = pytest.importorskip("playwright.sync_api")
    rig = ServerThread(replay=[CALC_ANSWER, "Nothing else to change.\n"], rate=300)
    server = rig.__enter__()
    proc, url = start_web(demo, tmp_path, "--base-url", server.base_url, "--model", "replay",
                          "-f", "calc.py")
    store = SessionStore(demo)

    def ask(page, instruction: str) -> None:
        page.wait_for_selector("canvas", timeout=30_000)
        page.wait_for_function("document.body.classList.contains('-first-byte')",
                               timeout=30_000)
        time.sleep(3)  # the app paints its first frame
        page.mouse.click(300, 852)  # on the prompt: the terminal takes the keyboard
        page.keyboard.type(instruction)
        page.keyboard.press("Enter")

    def apps(pid: int) -> set[int]:  # the steer processes textual-serve runs for its tabs
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return {int(k) for k in kids if b"app" in Path(f"/proc/{k}/cmdline").read_bytes()}

    def ends(sid: str) -> int:
        return sum(1 for r in store.load(sid) if type(r) is End)

    try:
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            _wait(lambda: store.ids(), 30, "the tab's app never saved its session")
            (sid,) = store.ids()
            ask(page, "add type hints")
            _wait(lambda: ends(sid) == 1, 60, "the first answer never finished streaming")
            time.sleep(1)
            before = apps(proc.pid)
            assert len(before) == 1, before
            page.reload()
            ask(page, "anything else?")
            after = apps(proc.pid)
            assert len(after) == 1 and after != before  # a fresh steer process, not the old one
            _wait(lambda: ends(sid) == 2, 60, "the reloaded tab's answer never finished")
            browser.close()
    finally:
        stop(proc)
        rig.__exit__(None, None, None)
    assert store.ids() == [sid]  # the same session, not a new one
    records = store.load(sid)
    assert [r.instruction for r in records if type(r) is TurnRec] == ["add type hints",
                                                                      "anything else?"]
    second = server.stats.bodies[-1]["messages"]
    said = json.dumps(second)
    assert "add type hints" in said and "anything else?" in said  # the first turn came back
    info = json.loads(store.log_path(sid).with_suffix(".json").read_text())
    assert info["turns"] == 2 and info["open"] == 3  # the review was resumed, hunks still open
