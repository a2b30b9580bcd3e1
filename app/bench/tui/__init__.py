"""The app-level benchmarks: the real app, headless (`App.run_test`), against the scripted
server `steer serve --replay` in a process of its own. `stream` is `steer bench tui` (one
answer at several rates, Esc, first paint), `variants` is `steer bench variants` (N answers
at once); `probe` holds what both measure with."""
