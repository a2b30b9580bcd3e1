"""`steer doctor`: whether steer can work on this machine, in one screen (or as JSON).

A first run must not break in a way the user cannot read. The doctor gathers what decides
that (app/doctor/checks.py: versions, the CPU, the config in effect, a remote endpoint, the
running `steer serve`) and runs the embedded model in a child process (app/doctor/probe.py),
so that a native crash is reported by name with a way forward instead of ending the doctor.
It exits 0 when every check passed, 1 when one failed, and names each failure on one line.

No key ever reaches the output: facts hold the names of variables, and everything printed
passes through `mask`, which replaces the value of every key or token this process can see
with *** (a server may echo a key back in its error).
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
import unicodedata

from app.config import API_KEY_ENV, ENV_PREFIX, Settings
from app.doctor import checks, probe
from app.providers.resolve import base_url_of

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.I)


def doctor(settings: Settings | None, problem: str | None = None, *, as_json: bool = False,
           skip_model: bool = False) -> int:
    """Print the report; 0 when all is well, 1 when a check failed. `problem`: why the
    settings could not be read (then the defaults are checked)."""
    s = settings or Settings.model_construct()
    report, failures = gather(s, skip_model)
    if problem:
        failures.insert(0, f"config: {problem}")
    report["failures"], report["ok"] = failures, not failures
    text = json.dumps(report, indent=2) if as_json else render(report)
    sys.stdout.write(mask(text, secrets(s)) + "\n")
    return 0 if not failures else 1


def gather(s: Settings, skip_model: bool) -> tuple[dict, list[str]]:
    versions, failures = checks.versions()
    cpu, flags = checks.cpu()
    config, bad = checks.config(s)
    failures += bad
    report: dict = {"versions": versions, "cpu": cpu, "config": config}
    name = config["provider"]
    if skip_model:
        report["model"] = {"checked": False, "why": "--skip-model"}
    elif name != "local" or s.agent:
        report["model"] = {"checked": False, "why": f"not in use: {s.agent or name} is configured "
                           "(steer doctor --provider local checks the embedded model)"}
    else:
        report["model"] = model = {"checked": True, **probe.run(config["model_path"])}
        if model.get("system_info"):
            cpu["llama_system_info"] = model["system_info"]
            cpu["build_not_cpu"] = checks.build_not_cpu(model["system_info"], flags)
        if not model["ok"]:
            failures.append(f"model: {model.get('error')} (details: {model['log']})")
    base_url = base_url_of(s, name)
    if base_url and not s.agent:
        var = config.get("api_key_env")
        key = os.environ.get(var) if var else None
        report["endpoint"], bad = checks.endpoint(base_url, key, config.get("model"))
        failures += bad
    else:
        report["endpoint"] = {"checked": False, "why": "no remote endpoint is configured"}
    from app.core.variants.check import sandbox_problem

    why = sandbox_problem()  # check_sandbox = true needs it
    report["sandbox"] = {"works": why is None, "why": why, "on": s.check_sandbox}
    if why and s.check_sandbox:
        failures.append(f"check_sandbox = true, but {why}")
    from app.providers.local_serve import log_path

    log = log_path()
    report["server"] = {"running": checks.servers(_serve_token()), "log": str(log),
                        "log_bytes": log.stat().st_size if log.is_file() else None}
    return report, failures


def _serve_token() -> str | None:
    from app.providers import serve_registry as registry

    token = registry.read().get("token")  # read, never made: the doctor writes no state
    return token if isinstance(token, str) else None


def secrets(s: Settings) -> list[str]:
    """Every value to hide: the configured key variable's, any variable named like a key or
    token, and the serve token."""
    found = [v for k, v in os.environ.items() if _SECRET_NAME.search(k) or k == s.api_key_env]
    found.append(_serve_token() or "")
    return sorted({v for v in found if len(v) >= 4}, key=len, reverse=True)


def mask(text: str, values: list[str]) -> str:
    for v in values:
        text = text.replace(v, "***").replace(json.dumps(v)[1:-1], "***")
    return text


def shown(text: str) -> str:
    """Outside text (a model's tokens, a server's message) with control and bidi characters
    made visible, so that nothing it holds acts on the terminal."""
    return "".join(c if c == " " or unicodedata.category(c)[0] not in "CZ"
                   else c.encode("unicode_escape").decode() for c in text)


# -- the one screen ----------------------------------------------------------------------------
def _mb(n: int | None) -> str:
    n = n or 0
    return (f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB" if n >= 2**20
            else f"{n / 2**10:.0f} kB")


def render(r: dict) -> str:
    out: list[str] = ["steer doctor: can steer work on this machine?", ""]

    def row(label: str, *lines: str) -> None:  # a line with a long path in it is kept whole
        wrapped = [w for line in lines for w in (
            [line] if max(map(len, line.split()), default=0) > 40 else
            textwrap.wrap(line, 88, subsequent_indent="  ", break_on_hyphens=False))]
        for i, line in enumerate(wrapped):
            out.append(f"{label if i == 0 else '':10} {line}")

    v = r["versions"]
    libs = ", ".join(f"{k} {v[k] or 'MISSING'}" for k in checks.PACKAGES)
    row("versions", f"Python {v['python']} ({v['python_executable']}), steer {v['steer']}",
        libs, f"git {v['git'] or 'not found'}; {v['platform']}")
    c = r["cpu"]
    have = " ".join(f for f, ok in c["flags"].items() if ok) or "none"
    lacks = " ".join(f for f, ok in c["flags"].items() if not ok) or "none"
    mem = (f", {_mb(c.get('memory_total_bytes'))} memory ({_mb(c.get('memory_available_bytes'))}"
           " available)" if c.get("memory_total_bytes") else "")
    row("cpu", f"{c['model']}, {c['cores']} cores{mem}", f"has: {have}", f"lacks: {lacks}")
    if c.get("llama_system_info"):
        row("", "llama.cpp uses: " + " ".join(checks.build_features(c["llama_system_info"])))
        for f in c.get("build_not_cpu") or ():
            row("", f"the llama.cpp build uses {f}, which this CPU lacks: expect SIGILL")
    row("model", *_model_lines(r["model"]))
    row("config", *_config_lines(r["config"]))
    e = r["endpoint"]
    if not e["checked"]:
        row("endpoint", f"not checked: {e['why']}")
    else:
        took = f"in {e['seconds'] * 1000:.0f} ms"
        said = (f"answered {e['status']} {took}" if "status" in e else f"no answer {took}")
        more = f": {shown(e['error'])}" if e.get("error") else (
            f", {e['models']} models" + ("" if e.get("model_listed") is None else
                                         ", the configured one listed" if e["model_listed"]
                                         else ", the configured one NOT listed")
            if "models" in e else "")
        row("endpoint", f"{'ok' if e['ok'] else 'FAILED'}  GET {e['url']} {said}{more}")
    box = r.get("sandbox")
    if box is not None:
        row("sandbox", ("bubblewrap works here: check_sandbox = true runs checks with the "
                        "system read-only, no network" + (" (on)" if box["on"] else ""))
            if box["works"] else f"check_sandbox cannot run here: {box['why']}")
    s = r["server"]
    running = [f"steer serve pid {x['pid']} on {x['address']}: "
               + (f"{_mb(x['rss_bytes'])} resident" if x["answers"] else
                  "running, /health does not answer" if x["alive"] else "gone (registered)")
               + f"; {x['model_path']}" for x in s["running"]] or ["no steer serve running"]
    log = f"{s['log']} ({_mb(s['log_bytes'])})" if s["log_bytes"] is not None else f"{s['log']} (none yet)"
    row("server", *running, f"log: {log}")
    out.append("")
    if r["failures"]:
        out.append(f"{len(r['failures'])} check(s) failed:")
        out += [f"  {shown(f)}" for f in r["failures"]]
    else:
        out.append("all checks passed")
    return "\n".join(out)


def _model_lines(m: dict) -> list[str]:
    if not m["checked"]:
        return [f"not checked: {m['why']}"]
    name = os.path.basename(m["path"])
    if not m["ok"]:
        return [f"FAILED  {name}: {shown(m.get('error') or '')}", f"path: {m['path']}"]
    rate = f" at {m['tokens_per_s']} tokens/s" if m.get("tokens_per_s") else ""
    return [f"ok  {name} (llama-cpp-python {m.get('llama_cpp')}) loaded in {m['load_s']:.2f} s, "
            f"first token in {m['first_token_s']:.2f} s, {len(m['tokens'])} tokens{rate}",
            "generated: " + shown(" ".join(json.dumps(t, ensure_ascii=False) for t in m["tokens"])),
            f"path: {m['path']}"]


def _config_lines(c: dict) -> list[str]:
    lines = [f"provider {c['provider']}, model {c.get('model') or '-'}, format {c['format']}, "
             f"stall timeout {c['stall_timeout']:g} s"]
    if c.get("base_url"):
        lines.append(f"base URL {c['base_url']}")
    if "model_path" in c:
        lines.append(f"model path: {c['model_path']}")
    if "api_key_env" in c:
        lines.append(f"API key: {c['api_key_env']} = ***" if c["api_key_set"] else
                     f"API key: {c['api_key_env']} (not set)" if c["api_key_env"] else
                     f"API key: none (no variable is named for it; {API_KEY_ENV} would be read)")
    if c.get("agent"):
        lines.append(f"agent {c['agent']} ({c['agent_found'] or 'not found on PATH'})")
    lines.append(f"config file {c['config_file']} "
                 f"({'found' if c['config_file_exists'] else 'none: the defaults'})")
    lines.append("from the environment: " + (", ".join(c["environment"]) or f"no {ENV_PREFIX} variable"))
    return lines
