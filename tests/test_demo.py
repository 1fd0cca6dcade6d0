"""The README's main job (``python -m polyir.demo``) runs and checks itself."""
from __future__ import annotations

import polyir.demo


def test_demo_compiles_both_models_without_fallbacks(capsys) -> None:
    results = polyir.demo.main()
    out = capsys.readouterr().out
    assert "interpreted (parallel loops shuffled) == numpy a @ b" in out
    assert [r["name"].split(" ")[0] for r in results] == ["transformer", "small"]
    for result in results:
        assert result["fallbacks"] == [] or result["fallbacks"] == ()
        assert result["loop_nests"] > 5
    assert out.count("matches eager") == 2
