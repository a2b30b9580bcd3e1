"""`steer bench ...`: benchmarks that print JSON. They measure; they never assert."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="steer bench")
    sub = p.add_subparsers(dest="which", required=True)
    e = sub.add_parser("engine", help="parser + pending diff throughput on a recorded answer")
    e.add_argument("--tokens", type=int, default=20_000)
    e.add_argument("--repeat", type=int, default=5)
    r = sub.add_parser("run", help="steer run --accept all against a loopback server, end to end")
    r.add_argument("--repeat", type=int, default=5)
    r.add_argument("--edits", type=int, default=65)
    t = sub.add_parser("tui", help="the real app, headless, against a loopback server")
    t.add_argument("--rates", default="1000,5000,20000,0")
    t.add_argument("--tokens", type=int, default=20_000)
    t.add_argument("--esc-trials", type=int, default=20)
    s = sub.add_parser("sync", help="watch + live rebase + git on a 50,000-file repository")
    s.add_argument("--trials", type=int, default=40)
    s.add_argument("--files", type=int, default=50_000)
    s.add_argument("--changed", type=int, default=10_000, help="files a checkout rewrites")
    args = p.parse_args(argv)
    if args.which == "engine":
        from app.bench.engine import run
        result = run(tokens=args.tokens, repeat=args.repeat)
    elif args.which == "sync":
        from app.bench.sync import run
        result = run(trials=args.trials, files=args.files, changed=args.changed)
    elif args.which == "run":
        from app.bench.e2e import run
        result = run(repeat=args.repeat, edits=args.edits)
    else:
        from app.bench.tui import run
        result = run(rates=[float(x) for x in args.rates.split(",")], tokens=args.tokens,
                     esc_trials=args.esc_trials)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0
