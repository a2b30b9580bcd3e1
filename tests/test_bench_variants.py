"""`steer bench variants` runs end to end with tiny parameters: every variant completes, the
tokens are counted, the figures are there. No timing bound: it is a benchmark."""

from __future__ import annotations

from app.bench.tui.variants import run


def test_bench_variants_smoke() -> None:
    out = run(ns=[2], rate=5000, tokens=200, repeat=1)
    assert out["bench"] == "variants" and out["answer_tokens"] >= 150
    assert [r["n"] for r in out["app"]] == [1, 2]  # N = 1 is always measured: the ratio's base
    for row in out["app"]:
        n = row["n"]
        assert row["trials"] == 1 and row["all_complete"]
        assert row["tokens_median"] == n * out["answer_tokens"]
        assert row["wall_s"]["median"] > 0 and row["wall_ratio_to_1"] is not None
        assert row["cpu_s_per_1000_tokens"]["median"] > 0
        assert row["token_to_screen_ms_p99"]["median"] >= row["token_to_screen_ms_p50"]["median"] > 0
        assert row["peak_rss_mb"]["median"] > 20
        trial = out["app_trials"][str(n)][0]
        assert trial["variants"] == n and trial["complete"] == n and trial["states"] == ["done"]
        assert trial["tokens_each"] == [out["answer_tokens"]] * n
        assert all(h == out["answer_edits"] for h in trial["hunks_each"])
        assert trial["shown_chunks_timed"] > 0
    assert out["app"][0]["wall_ratio_to_1"] == 1.0
    for row in out["steer_run"]:
        assert row["all_complete"] and row["tokens_median"] == row["n"] * out["answer_tokens"]
        assert row["wall_s"]["median"] > row["last_token_s_max"]["median"] > 0
