"""`steer doctor`: whether steer can work on this machine (app/doctor/)."""

from __future__ import annotations

from app.cli.common import (
    ConfigError,
    Parser,
    lenient_stdout,
    provider_flags,
    settings_from,
)


# -- steer doctor -------------------------------------------------------------------------------
def cmd_doctor(argv: list[str]) -> int:
    p = Parser(prog="steer doctor", description="Check whether steer can work on this machine: "
                "versions, the CPU, the embedded model (loaded and run in a child process), the "
                "config in effect, a remote endpoint, the running steer serve.",
                epilog="exit codes: 0 all is well, 1 a check failed (each is named at the end), "
                       "2 usage. No key is ever printed.")
    p.add_argument("--json", action="store_true", help="the same facts as JSON")
    p.add_argument("--skip-model", action="store_true",
                   help="do not load and run the embedded model (a quick run)")
    provider_flags(p)
    args = p.parse_args(argv)
    from app.doctor import doctor

    try:
        settings, problem = settings_from(args), None
    except ConfigError as exc:  # the rest is still worth checking, with the defaults
        settings, problem = None, str(exc)
    lenient_stdout()  # a model's token may be something the terminal cannot encode
    try:
        return doctor(settings, problem, as_json=args.json, skip_model=args.skip_model)
    except KeyboardInterrupt:  # the model check's child is stopped with it
        return 130
