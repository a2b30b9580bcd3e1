"""`steer run` on a real terminal shows outside text, never obeys it (DESIGN rule 12): the
real CLI in a subprocess on a real pseudo-terminal, a real git repository, a real loopback
server replaying a hostile answer (escape sequences that set the title, colour or clear the
screen, write the clipboard; C1 controls; a bidi override), a server whose error carries
them, and a scripted ACP agent whose permission title does. What reaches the terminal holds
only steer's own sequences, and the hostile ones are shown as visible escapes. On a pipe the
diff stays a byte-exact patch that `git apply` takes."""

from __future__ import annotations

import fcntl
import http.server
import json
import os
import pty
import re
import shlex
import shutil
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

from conftest import SRC, git, init_repo, sr
from hypothesis import given
from hypothesis import strategies as st
from invisible_oracle import holds_any
from test_cli import STEER, served

from app.view.outside_text import terminal_line, visible

HOSTILE = ("title \x1b]2;PWNED\x07 red \x1b[31mRED\x1b[0m clear \x1b[2J c1 \x9b31m "
           "bidi \u202eevil\u202c clip \x1b]52;c;aGk=\x07 bell \x07 ok")
LINE = 'x = "\x1b[2J\u202e"  # \x1b]2;T\x07'  # what the edit puts in the file
ANSWER = (f"Here: {HOSTILE}\n\n" + sr("f.txt", "line 3\n", f"{LINE}\n")
          + "*** Begin Patch\n*** Delete File: gone\x1b[31m.txt\n*** End Patch\n"
          + f"Done {HOSTILE}\n")
# steer's own sequences: SGR dim / normal intensity / reset, and erase-line
OWN = re.compile(r"\x1b\[(?:2|22|0)m|\x1b\[2K")


def run_on_pty(root: Path, *args: str, stdout_tty: bool = True,
               env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run steer with its stderr (and stdout unless `stdout_tty` is False) on a pseudo-
    terminal: (exit code, every byte the terminal got, stdout's bytes when piped)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 200, 0, 0))
    e = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "COLUMNS": "200",
         **(env or {})}
    proc = subprocess.Popen([*STEER, *args], cwd=root, env=e, stdin=subprocess.DEVNULL,
                            stdout=slave if stdout_tty else subprocess.PIPE, stderr=slave)
    os.close(slave)
    piped = bytearray()
    reader = None
    if not stdout_tty:
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: piped.extend(proc.stdout.read()))
        reader.start()
    got = bytearray()
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        got += data
    os.close(master)
    if reader is not None:
        reader.join()
    return proc.wait(timeout=60), bytes(got), bytes(piped)


def assert_only_steers_sequences(screen: bytes) -> str:
    """Nothing a terminal would obey came from the data; returns the text with steer's own
    sequences taken out (what a reader sees)."""
    text = screen.decode("utf-8")
    for m in re.finditer("\x1b", text):
        assert OWN.match(text, m.start()), f"foreign escape at {m.start()}: {text[m.start():m.start() + 12]!r}"
    assert "\x07" not in text and "\x9b" not in text and "\u202e" not in text, text
    seen = OWN.sub("", text)
    assert not holds_any(seen.replace("\r", "")), seen  # (\r\n: the pty's own newline)
    return seen


def test_a_hostile_answer_on_a_terminal_is_shown_not_obeyed(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    with served(ANSWER) as server:
        code, screen, _ = run_on_pty(repo, "run", "edit it", "-f", "f.txt", "--base-url",
                                     server.base_url, "--model", "replay")
    assert code == 4, screen  # the delete of a file that is not there was refused
    seen = assert_only_steers_sequences(screen)
    assert b"\x1b]" not in screen and b"\x1b[31m" not in screen and b"\x1b[2J" not in screen
    # the prose, the refusal quoting the model's path, the flag and the diff: all visible
    assert r"title \x1b]2;PWNED\x07 red \x1b[31mRED\x1b[0m clear \x1b[2J c1 \x9b31m" in seen
    assert r"bidi \u202eevil\u202c clip \x1b]52;c;aGk=\x07 bell \x07 ok" in seen
    assert r"edit refused: cannot delete gone\x1b[31m.txt" in seen
    assert "invisible characters: U+001B, U+202E, U+0007" in seen
    assert r'+x = "\x1b[2J\u202e"  # \x1b]2;T\x07' in seen  # the diff on stdout, a terminal too
    # the escapes are drawn dimmed: steer's SGR around each
    assert "\x1b[2m\\x1b\x1b[22m]2;PWNED" in screen.decode()
    assert (repo / "f.txt").read_text() == SRC  # and nothing was written


def test_on_a_pipe_the_diff_is_byte_exact_and_git_apply_takes_it(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    with served(ANSWER) as server:
        code, screen, diff = run_on_pty(repo, "run", "edit it", "-f", "f.txt", "--base-url",
                                        server.base_url, "--model", "replay", stdout_tty=False)
    assert code == 4
    assert_only_steers_sequences(screen)  # stderr is still the terminal
    assert f"+{LINE}\n".encode() in diff and b"\\x1b" not in diff
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    (tmp_path / "p.diff").write_bytes(diff)
    git(copy, "apply", str(tmp_path / "p.diff"))
    assert (copy / "f.txt").read_bytes() == SRC.replace("line 3\n", f"{LINE}\n").encode()


def test_json_on_a_terminal_carries_no_raw_control_character(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    answer = ANSWER.replace("ok\n", "ok \x7f del\n")  # DEL: JSON itself leaves it raw
    with served(answer) as server:
        code, screen, _ = run_on_pty(repo, "run", "edit it", "-f", "f.txt", "--base-url",
                                     server.base_url, "--model", "replay", "--json")
    assert code == 4
    assert_only_steers_sequences(screen)
    body = screen.decode()
    report = json.loads(body[body.index("\n{") + 1:].replace("\r\n", "\n"))
    assert HOSTILE in report["explanation"] and "\x7f del" in report["explanation"]
    assert f"+{LINE}" in report["diff"]


class _Refusing(http.server.BaseHTTPRequestHandler):
    """A server whose error message is hostile (any POST: 401)."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"error": {"message": f"bad key {HOSTILE}", "type": "auth"}}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_servers_error_message_is_shown_not_obeyed(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code, screen, _ = run_on_pty(repo, "run", "edit it", "-f", "f.txt", "--base-url",
                                     f"http://127.0.0.1:{server.server_address[1]}/v1",
                                     "--model", "m")
    finally:
        server.shutdown()
        server.server_close()
    assert code == 3
    seen = assert_only_steers_sequences(screen)
    assert r"bad key title \x1b]2;PWNED\x07" in seen, seen


def test_an_agents_permission_title_is_shown_not_obeyed(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    steps = {"turns": [[{"permission": {"id": "t1", "title": f"Run {HOSTILE}"}},
                        {"say": f"said {HOSTILE}"}]], "chunk": 7}
    (tmp_path / "script.json").write_text(json.dumps(steps))
    cmd = shlex.join([sys.executable, str(Path(__file__).with_name("acp_agent.py")),
                      str(tmp_path / "script.json")])
    code, screen, _ = run_on_pty(repo, "run", "go", "--agent", cmd,
                                 env={"STEER_TEST_AGENT_LOG": str(tmp_path / "agent.log")})
    assert code == 0, screen
    seen = assert_only_steers_sequences(screen)
    assert r"rejected the agent's request: Run title \x1b]2;PWNED\x07" in seen
    assert r"said title \x1b]2;PWNED\x07" in seen


@given(st.text(alphabet=st.sampled_from(list("ab \t\x1b\x07\x9b\u202e\u200b[]"))), st.integers(0, 30))
def test_the_live_lines_cut_keeps_whole_escapes_within_the_width(text, width):
    """The line being written, next to the status (LiveStatus): at most `width` columns of
    the text as shown, an escape never cut in half, only steer's own sequences."""
    out, cols = terminal_line(text, width)
    plain = OWN.sub("", out)
    assert len(plain) == cols <= width and not holds_any(plain)
    assert visible(text).startswith(plain)
    assert cols >= min(width, len(visible(text))) - 5  # short only by an escape that did not fit


def test_steer_sessions_on_a_terminal_shows_what_it_quotes(tmp_path):
    """A saved instruction may hold what the user pasted (a log with escapes in it): the
    session list on a terminal shows it."""
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    with served(sr("f.txt", "line 3\n", "line three\n")) as server:
        code, _, _ = run_on_pty(repo, "run", f"fix {HOSTILE}", "-f", "f.txt", "--base-url",
                                server.base_url, "--model", "replay", "--accept", "all")
    assert code == 0
    code, screen, _ = run_on_pty(repo, "sessions")
    assert code == 0
    assert r"fix title \x1b]2;PWNED\x07" in assert_only_steers_sequences(screen)
