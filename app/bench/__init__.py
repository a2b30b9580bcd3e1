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
    v = sub.add_parser("variants", help="N parallel variants in the real app, headless, and "
                       "through `steer run --variants N`, against a loopback server")
    v.add_argument("--ns", default="1,2,3,4", help="the numbers of variants measured")
    v.add_argument("--rate", type=float, default=1000.0, help="each answer's tokens/s")
    v.add_argument("--tokens", type=int, default=3000, help="the answer's length")
    v.add_argument("--repeat", type=int, default=3, help="trials per N (medians and spread)")
    v.add_argument("--model", action="store_true", help="also the embedded model (steer serve "
                   "without --replay; it shares the machine's cores with the app)")
    v.add_argument("--max-tokens", type=int, default=48, help="each answer's cap with --model")
    v.add_argument("--no-cli", action="store_true", help="skip `steer run --variants N`")
    w = sub.add_parser("transport", help="persistent WebSocket vs new HTTPS connections, native "
                       "steer vs cancel-and-resend, Esc to stopped, against steer serve")
    w.add_argument("--requests", type=int, default=100)
    w.add_argument("--trials", type=int, default=20)
    w.add_argument("--first-token-delay", type=float, default=0.02,
                   help="seconds the replayed model takes to its first token")
    w.add_argument("--model", action="store_true", help="also measure the embedded model")
    w.add_argument("--turns", type=int, default=20, help="turns of the scripted session whose "
                   "prefix-continuation rate is measured")
    w.add_argument("--only", choices=["continuation"], help="measure only this part")
    c = sub.add_parser("cas", help="the write window left for a save to be lost (Workspace.swap)")
    c.add_argument("--sizes", default="1000,64000,1000000", help="file sizes in bytes")
    c.add_argument("--writes", type=int, default=1000, help="writes per file size and mode")
    c.add_argument("--dir", help="where to write (default: the temp dir; pick your repo's disk)")
    s = sub.add_parser("sync", help="watch + live rebase + git on a 50,000-file repository")
    s.add_argument("--trials", type=int, default=40)
    s.add_argument("--files", type=int, default=50_000)
    s.add_argument("--changed", type=int, default=10_000, help="files a checkout rewrites")
    n = sub.add_parser("sessions", help="saving sessions: resume time and RSS (200 turns, 2,000 "
                       "hunks), write amplification at 5,000 tok/s, token->screen saving on/off")
    n.add_argument("--turns", type=int, default=200)
    n.add_argument("--hunks", type=int, default=2_000)
    n.add_argument("--rate", type=float, default=5_000)
    n.add_argument("--pairs", type=int, default=2, help="app runs with saving off, then on")
    k = sub.add_parser("task", help="tokens and seconds to an accepted change, per edit format, "
                       "on small tasks made from the standard library")
    k.add_argument("--quick", action="store_true", help="6 tasks instead of 24")
    k.add_argument("--formats", default=",".join(("whole", "search_replace", "apply_patch")))
    k.add_argument("--backends", default="scripted,model", help="scripted (1,000 tok/s loopback "
                   "server), model (the embedded model)")
    k.add_argument("--rate", type=float, default=1000.0, help="the scripted server's tokens/s")
    k.add_argument("--model-path", help="another GGUF for the model back-end")
    k.add_argument("--rows", action="store_true", help="also print every task's figures")
    k.add_argument("--check", action="store_true", help="each task with a test that only its "
                   "exact result passes, checked before any accept, a failure sent back up to "
                   "2 times (app/bench/task_check.py)")
    m = sub.add_parser("model", help="the embedded model through steer (steer serve, the "
                       "WebSocket) vs a direct llama-cpp-python call on the same prompt")
    m.add_argument("--trials", type=int, default=6)
    m.add_argument("--max-tokens", type=int, default=64)
    m.add_argument("--model-path", help="another GGUF")
    x = sub.add_parser("context", help="the repository map vs aider's, on the standard library "
                       "and a generated tree: cold/warm build, update, request wait, recall")
    x.add_argument("--files", type=int, default=50_000, help="files in the generated tree")
    x.add_argument("--instructions", type=int, default=50)
    x.add_argument("--budget", type=int, default=1500, help="map tokens (aider: --map-tokens)")
    x.add_argument("--trees", default="stdlib,generated,launch",
                   help="launch: `steer run` twice on a generated tree of --launch-files files, "
                        "launch -> its request at a loopback server, and the map it carried")
    x.add_argument("--launch-files", type=int, default=20_000)
    x.add_argument("--stdlib", help="another standard library folder")
    x.add_argument("--updates", type=int, default=10, help="single-file updates timed")
    x.add_argument("--no-aider", action="store_true", help="steer only")
    x.add_argument("--aider-version", default="0.86.2")
    x.add_argument("--aider-recall", type=int, default=50,
                   help="instructions to rank with aider's RepoMap too (0: none)")
    x.add_argument("--aider-recall-cap", type=float, default=600.0,
                   help="seconds aider's recall may take per tree")
    x.add_argument("--nice", type=int, default=0, help="the map's worker processes' niceness: "
                   "0, aider's own, by default (the app runs them at 10, below its UI; on an "
                   "idle machine that changes nothing)")
    args = p.parse_args(argv)
    result: dict
    if args.which == "model":
        from app.bench import model
        result = model.run(trials=args.trials, max_tokens=args.max_tokens,
                           model_path=args.model_path)
    elif args.which == "sessions":
        from app.bench import sessions
        result = sessions.run(turns=args.turns, hunks=args.hunks, rate=args.rate, pairs=args.pairs)
    elif args.which == "engine":
        from app.bench import engine
        result = engine.run(tokens=args.tokens, repeat=args.repeat)
    elif args.which == "sync":
        from app.bench import sync
        result = sync.run(trials=args.trials, files=args.files, changed=args.changed)
    elif args.which == "run":
        from app.bench import e2e
        result = e2e.run(repeat=args.repeat, edits=args.edits)
    elif args.which == "transport":
        from app.bench import transport
        result = transport.run(requests=args.requests, trials=args.trials,
                               first_token_delay=args.first_token_delay, model=args.model,
                               turns=args.turns, only=args.only)
    elif args.which == "task":
        from app.bench import task, task_check
        result = (task_check.run if args.check else task.run)(
            quick=args.quick, formats=args.formats.split(","), backends=args.backends.split(","),
            rate=args.rate, model_path=args.model_path, rows=args.rows)
    elif args.which == "context":
        from app.bench import context
        result = context.run(files=args.files, n_instructions=args.instructions,
                             budget=args.budget, aider=not args.no_aider,
                             aider_version=args.aider_version, aider_recall=args.aider_recall,
                             aider_recall_cap=args.aider_recall_cap, stdlib=args.stdlib,
                             updates=args.updates, trees=args.trees, nice=args.nice,
                             launch_files=args.launch_files)
    elif args.which == "cas":
        from app.bench import cas
        result = cas.run([int(x) for x in args.sizes.split(",")], args.writes, args.dir)
    elif args.which == "variants":
        from app.bench.tui import variants
        result = variants.run(ns=[int(x) for x in args.ns.split(",")], rate=args.rate,
                              tokens=args.tokens, repeat=args.repeat, model=args.model,
                              max_tokens=args.max_tokens, cli=not args.no_cli)
    else:
        from app.bench.tui import stream
        result = stream.run(rates=[float(x) for x in args.rates.split(",")], tokens=args.tokens,
                         esc_trials=args.esc_trials)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0
