"""polyir.draw: dependence graphs, nest graphs, fusion plans and ``polyir-opt --draw``."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="polyir.draw needs the plots extra")

import polyir  # noqa: E402
from polyir import draw  # noqa: E402
from polyir.cli import main  # noqa: E402
from polyir.polyhedral import dependences  # noqa: E402
from polyir.report.changes import compare  # noqa: E402
from polyir.testing import assert_equivalent  # noqa: E402
from tests.draw.test_draw_domain import CHAIN, MATMUL, SMOOTH  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

THREE_NESTS = polyir.parse("""
func three(A: f32[N], B: f32[N], C: f32[N], D: f32[N]) {
  for i = 0 to N {
    S0: B[i] = A[i] + 1.0
  }
  for i_1 = 0 to N {
    S1: C[i_1] = B[i_1] * 2.0
  }
  for i_2 = 0 to N {
    S2: D[i_2] = B[i_2] + C[i_2]
    S3: B[i_2] = 0.0
  }
}""")


def _texts(picture, prefix: str) -> list[str]:
    return [a.get_text() for a in picture.artists(prefix)]


def test_the_statement_graph_has_one_arc_per_dependence() -> None:
    deps = dependences(MATMUL)
    picture = draw.dependence_graph(MATMUL)
    assert picture.counts == {"nodes": 2, "edges": len(deps)} and len(deps) == 7
    assert len(picture.artists("edge:")) == 7 and len(picture.artists("node:")) == 2
    for kind in ("raw", "war", "waw", "flow"):
        assert len(picture.artists(f"edge:{kind}")) == len(deps.filter(kind))
    labels = _texts(picture, "edge-label")
    assert "FLOW C @ k" in labels and "RAW C @ =" in labels   # carried by k; loop-independent
    assert draw.dependence_graph(MATMUL, kinds="flow").counts["edges"] == 2


def test_the_nest_graph_joins_nests_per_kind_and_buffer() -> None:
    picture = draw.nest_graph(THREE_NESTS)
    # by hand: B flows from nest 0 to 1 and 2 (RAW), C from 1 to 2 (RAW), nest 2 rewrites B after
    # nests 0 and 1 read or wrote it (WAR from 1, WAW from 0)
    expected = {"RAW B", "RAW C", "WAR B", "WAW B"}
    labels = _texts(picture, "edge-label")
    assert set(labels) == expected and picture.counts == {"nests": 3, "edges": len(labels)}
    assert sorted(labels) == sorted(["RAW B", "RAW B", "RAW C", "WAR B", "WAW B"])
    assert len(picture.artists("edge:")) == picture.counts["edges"]
    node_text = _texts(picture, "node:")
    assert node_text[2] == "nest 2\nS2, S3\nfor i_2"


# ------------------------------------------------------------------ fusion
UNFUSED = polyir.parse("""
func f(A: f32[N, M], C: f32[N, M]) {
  local t: f32[N, M]
  local u: f32[N]
  for i = 0 to N {
    for j = 0 to M {
      S0: t[i, j] = A[i, j] * 2.0
    }
  }
  for i_1 = 0 to N {
    for j_1 = 0 to M {
      S1: C[i_1, j_1] = t[i_1, j_1] + 1.0
    }
  }
  for i_2 = 0 to N {
    S2: u[i_2] = C[i_2, 0]
  }
  for i_3 = 0 to N {
    S3: C[i_3, 0] = u[i_3] * 0.5
  }
}""")

FUSED = polyir.parse("""
func f(A: f32[N, M], C: f32[N, M]) {
  for i = 0 to N {
    local t: f32[M]
    for j = 0 to M {
      S0: t[j] = A[i, j] * 2.0
    }
    for j_1 = 0 to M {
      S1: C[i, j_1] = t[j_1] + 1.0
    }
  }
  for i_2 = 0 to N {
    local u: f32[]
    S2: u[] = C[i_2, 0]
    S3: C[i_2, 0] = u[] * 0.5
  }
}""")

ELIMINATED = polyir.parse(str(FUSED).replace("""    local u: f32[]
    S2: u[] = C[i_2, 0]
    S3: C[i_2, 0] = u[] * 0.5""", """    S3: C[i_2, 0] = C[i_2, 0] * 0.5"""))


def test_the_fusion_plan_shows_groups_and_buffer_sizes() -> None:
    assert_equivalent(UNFUSED, FUSED)
    assert_equivalent(UNFUSED, ELIMINATED)
    picture = draw.fusion(UNFUSED, FUSED, {"N": 64, "M": 32})
    assert picture.counts == {"nests_before": 4, "nests_after": 2, "links": 4, "fused": 2,
                              "buffers_before": 2, "buffers_after": 2}
    assert len(picture.artists("nest-before:")) == 4 and len(picture.artists("nest-after:")) == 2
    assert len(picture.artists("link")) == 4
    (t_before,) = _texts(picture, "buffer-before:t")
    assert "f32[N, M]" in t_before and "8192 B" in t_before
    (t_after,) = _texts(picture, "buffer-after:t")
    assert "f32[M] (shrunk)" in t_after and "in loop i" in t_after and "128 B" in t_after
    (u_after,) = _texts(picture, "buffer-after:u")
    assert "f32[] (shrunk)" in u_after and "in loop i_2, 4 B" in u_after
    assert "local buffers 8448 B -> 132 B" in picture.figure.axes[0].get_title()
    eliminated = draw.fusion(UNFUSED, ELIMINATED, {"N": 64, "M": 32})
    assert _texts(eliminated, "buffer-after:u") == ["u: removed"]
    assert eliminated.counts["fused"] == 1 and eliminated.counts["buffers_after"] == 1
    symbolic = draw.fusion(UNFUSED, FUSED)
    assert "4*N*M B" in _texts(symbolic, "buffer-before:t")[0]


def test_the_comparison_names_what_fusion_did() -> None:
    (changes,) = compare(UNFUSED, FUSED)
    assert changes.fused_groups() == [(0, (0, 1)), (1, (2, 3))]
    lines = changes.lines({"N": 64, "M": 32})
    assert "top-level nests: 4 -> 2" in lines
    assert "nests 0, 1 fused into nest 0 (S0, S1)" in lines
    assert "nests 2, 3 fused into nest 1 (S2, S3)" in lines
    assert "t: shrunk, f32[N, M] function-level (8192 B) -> f32[M] in loop i (128 B)" in lines
    assert "u: shrunk, f32[N] function-level (256 B) -> f32[] in loop i_2 (4 B)" in lines
    (gone,) = compare(UNFUSED, ELIMINATED)
    assert "statements S2 removed" in gone.lines() and "u: removed (f32[N], 4*N B)" in gone.lines()
    (same,) = compare(UNFUSED, UNFUSED)
    assert same.identical and same.lines() == [] and str(same) == "f: unchanged"


def test_a_recomputed_producer_is_a_dashed_link() -> None:
    again = polyir.parse("""
func chain(A: f32[N], B: f32[N], C: f32[N]) {
  for i = 0 to N {
    S0: B[i] = A[i] * 2.0
  }
  for i_1 = 1 to N {
    S0_1: B[i_1 - 1] = A[i_1 - 1] * 2.0
    S1: C[i_1] = B[i_1] + B[i_1 - 1]
  }
}""")
    assert_equivalent(CHAIN, again)
    (changes,) = compare(CHAIN, again)
    assert changes.copies == {"S0": ("S0_1",)} and "statement S0 recomputed: copies S0_1" in changes.lines()
    picture = draw.fusion(CHAIN, again)
    styles = sorted(line.get_linestyle() for line in picture.artists("link"))
    assert styles == ["-", "-", "--"]


# ------------------------------------------------------------------ polyir-opt --draw
def test_polyir_opt_draws_instead_of_printing(tmp_path, capsys) -> None:
    smooth = tmp_path / "smooth.ir"
    smooth.write_text(str(SMOOTH))
    matmul = str(ROOT / "examples/matmul.ir")
    runs = [
        ([matmul, "--draw", "domain", "--params", "M=2,N=2,K=3"], "domain.png"),
        ([str(smooth), "--pipeline", "reschedule", "--draw", "schedule", "--params", "n=4,m=4"], "order.svg"),
        ([matmul, "--draw", "deps"], "deps.png"),
        ([matmul, "--pipeline", "distribute", "--draw", "nests"], "nests.png"),
        ([matmul, "--pipeline", "distribute", "--draw", "fusion", "--params", "M=4,N=4,K=4"], "plan.pdf"),
    ]
    for argv, name in runs:
        assert main(argv + ["-o", str(tmp_path / name)]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out == ""
    assert (tmp_path / "domain.png").read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in (tmp_path / "order.svg").read_text()
    assert (tmp_path / "plan.pdf").read_bytes()[:4] == b"%PDF"


@pytest.mark.parametrize("argv, message", [
    (["--draw", "domain", "--params", "M=2"], "missing N, K"),
    (["--draw", "domain", "--params", "M=2,N"], "is not NAME=INTEGER"),
    (["--draw", "picture"], "choose one of domain, deps"),
    (["--draw", "tiles", "--params", "M=2,N=2,K=2"], "nothing looks tiled"),
    (["--draw", "deps", "--emit", "polyir"], "needs -o"),
])
def test_polyir_opt_draw_errors_write_nothing(tmp_path, capsys, argv, message) -> None:
    output = tmp_path / "x.png"
    extra = [] if "needs -o" in message else ["-o", str(output)]
    assert main([str(ROOT / "examples/matmul.ir")] + argv + extra) == 1
    err = capsys.readouterr().err
    assert err.startswith("polyir-opt: error:") and message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
