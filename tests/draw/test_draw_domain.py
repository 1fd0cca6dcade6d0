"""polyir.draw: domains, schedules and tiles, checked by what is drawn.

The oracle for every count is the brute-force trace of the program
(``polyir.polyhedral.bruteforce``: its instances and the dependences between
them found by comparing every pair of accesses), never isl, which the pictures
themselves use; the artists are counted on the figure (``gid``s)."""
from __future__ import annotations

import pytest
from hypothesis import assume, given, settings

pytest.importorskip("matplotlib", reason="polyir.draw needs the plots extra")

import polyir  # noqa: E402
from polyir import draw  # noqa: E402
from polyir.draw import DrawError, Picture  # noqa: E402
from polyir.draw.instances import match_instances  # noqa: E402
from polyir.polyhedral import apply_schedule, check_parallel  # noqa: E402
from polyir.polyhedral.bruteforce import brute_force_dependences, trace  # noqa: E402
from polyir.testing import assert_equivalent, programs, symbol_values  # noqa: E402
from tests.conftest import examples  # noqa: E402

SMOOTH = polyir.parse("""
func smooth(A: f64[n, m]) {
  for i = 1 to n {
    for j = 1 to m {
      S0: A[i, j] = (A[i - 1, j] + A[i, j - 1]) * 0.5:f64
    }
  }
}""")

JACOBI = polyir.parse("""
func jacobi1d(A: f64[N], B: f64[N], T: index) {
  for t = 0 to T {
    for i = 1 to N - 1 {
      S0: B[i] = (A[i - 1] + A[i] + A[i + 1]) * 0.25:f64
    }
    for i_1 = 1 to N - 1 {
      S1: A[i_1] = B[i_1]
    }
  }
}""")

CHAIN = polyir.parse("""
func chain(A: f32[N], B: f32[N], C: f32[N]) {
  for i = 0 to N {
    S0: B[i] = A[i] * 2.0
  }
  for i_1 = 1 to N {
    S1: C[i_1] = B[i_1] + B[i_1 - 1]
  }
}""")

TRIANGLE = polyir.parse("""
func tri(L: f64[N, N], x: f64[N]) {
  for i = 0 to N {
    for j = 0 to i step 2 {
      if (i + j >= 2) {
        S0: x[i] = x[i] - L[i, j] * x[j]
      }
    }
  }
}""")

MATMUL = polyir.parse("""
func matmul(C: f32[M, N], A: f32[M, K], B: f32[K, N]) {
  for i = 0 to M {
    for j = 0 to N {
      S0: C[i, j] = 0.0
      for k = 0 to K {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}""")

CASES = [(SMOOTH, {"n": 5, "m": 4}), (JACOBI, {"N": 6, "T": 3}), (CHAIN, {"N": 6}),
         (TRIANGLE, {"N": 7}), (MATMUL, {"M": 2, "N": 3, "K": 3})]


def _project(picture: Picture) -> None:
    """3-d artists project their points when drawn; 2-d ones need no drawing."""
    if any(ax.name == "3d" for ax in picture.figure.axes):
        picture.figure.canvas.draw()


def drawn_points(picture: Picture) -> int:
    _project(picture)
    return sum(len(c.get_offsets()) for c in picture.artists("instances:"))


def drawn_arrows(picture: Picture, kind: str) -> int:
    """2-d: one arrow patch per dependence; 3-d: one quiver, 3 segments per arrow."""
    _project(picture)
    count = 0
    for artist in picture.artists(f"dependence:{kind}"):
        segments = getattr(artist, "get_segments", None)
        count += len(segments()) // 3 if segments is not None else 1
    return count


@pytest.mark.parametrize("module, sizes", CASES, ids=lambda x: getattr(getattr(x, "entry", None), "name", ""))
def test_one_point_per_instance_and_one_arrow_per_dependence(module, sizes) -> None:
    picture = draw.domain(module, sizes, kinds=None)
    oracle = brute_force_dependences(module.entry, sizes)
    instances = trace(module.entry, sizes)
    assert drawn_points(picture) == len(instances) == picture.counts["instances"] == picture.counts["points"]
    for kind in ("flow", "raw", "war", "waw"):
        assert drawn_arrows(picture, kind) == len(oracle[kind]), kind
    assert picture.counts["arrows"] == picture.counts["dependences"] == sum(len(v) for v in oracle.values())
    flow_only = draw.domain(module, sizes)
    assert drawn_arrows(flow_only, "flow") == len(oracle["flow"]) and not flow_only.artists("dependence:raw")


@settings(max_examples=examples(8), deadline=None)
@given(programs(max_depth=3, max_statements=3, gathers=False))
def test_random_programs_are_drawn_exactly(module) -> None:
    sizes = symbol_values(module, 2)
    try:
        picture = draw.domain(module, sizes, kinds="raw")
    except DrawError as error:  # only for sizes too large to draw
        assume("too many" not in str(error))
        raise
    function = module.entry
    assert drawn_points(picture) == len(trace(function, sizes))
    assert drawn_arrows(picture, "raw") == len(brute_force_dependences(function, sizes)["raw"])


def test_deeper_nests_are_projected_onto_the_chosen_loops() -> None:
    picture = draw.domain(MATMUL, {"M": 2, "N": 3, "K": 3}, dims=("i", "j"))
    assert picture.counts["instances"] == 2 * 3 + 2 * 3 * 3
    # S0 and S1 each project onto the 2 x 3 points (i, j); a flow arrow from S0 to S1 remains,
    # the k -> k + 1 ones of S1 collapse onto one point and are not drawn
    assert drawn_points(picture) == 12
    assert drawn_arrows(picture, "flow") == 6
    assert "projected" in picture.figure.axes[0].get_title()


def test_a_witness_is_ringed_and_joined() -> None:
    witness = check_parallel(SMOOTH, "j").witness
    picture = draw.domain(SMOOTH, {"n": 4, "m": 4}, witness=witness)
    rings = picture.artists("witness")
    assert len(rings) == 2  # the two ringed instances, and the arrow between them
    offsets = [c for c in rings if hasattr(c, "get_offsets")][0].get_offsets()
    assert sorted(map(tuple, offsets.tolist())) == sorted(inst.point for inst in witness)
    with pytest.raises(DrawError, match="not drawn at these sizes"):
        draw.domain(SMOOTH, {"n": 2, "m": 2}, witness=witness)


def test_bad_requests_are_typed_errors() -> None:
    with pytest.raises(DrawError, match="missing m"):
        draw.domain(SMOOTH, {"n": 4})
    with pytest.raises(DrawError, match="no statement S9"):
        draw.domain(SMOOTH, {"n": 4, "m": 4}, statements="S9")
    with pytest.raises(DrawError, match="unknown dependence kind"):
        draw.domain(SMOOTH, {"n": 4, "m": 4}, kinds="rar")
    with pytest.raises(DrawError, match="too many"):
        draw.domain(SMOOTH, {"n": 100, "m": 100})
    with pytest.raises(DrawError, match="must be an int"):
        draw.domain(SMOOTH, {"n": 4, "m": 4.5})
    with pytest.raises(DrawError, match="cannot save"):
        draw.domain(SMOOTH, {"n": 3, "m": 3}).save("picture.gif")


# ------------------------------------------------------------------ schedules
WAVE = polyir.transform(SMOOTH, "reschedule,mark-parallel")


def test_the_wavefront_groups_the_anti_diagonals() -> None:
    sizes = {"n": 5, "m": 5}
    matching = match_instances(SMOOTH.entry, WAVE.entry, sizes)
    # oracle: the wavefront runs c0 = i + j, so each step's original instance lies on its diagonal
    for event, (_, (i, j)) in zip(matching.events, matching.order, strict=True):
        assert dict(event.env)["c0"] == i + j
    assert sorted(matching.order) == sorted(matching.original) and not any(matching.recomputed)
    picture = draw.schedule(SMOOTH, WAVE, sizes, color_by=["c0"])
    assert picture.counts["groups"] == len({i + j for i in range(1, 5) for j in range(1, 5)})
    assert drawn_points(picture) == 2 * 16  # both panels
    labels = [a.get_text() for a in picture.artists("order")]
    assert sorted(labels) == sorted([str(k) for k in range(16)] * 2)
    assert len(picture.artists("path")) == 2


def test_the_order_after_fusion_interleaves_the_statements() -> None:
    fused = apply_schedule(CHAIN, "[N] -> { S0[i] -> [i, 0]; S1[i] -> [i, 1] }")
    assert_equivalent(CHAIN, fused)
    matching = match_instances(CHAIN.entry, fused.entry, {"N": 4})
    assert [name for name, _ in matching.order] == ["S0"] + ["S0", "S1"] * 3
    assert [name for name, _ in matching.original] == ["S0"] * 4 + ["S1"] * 3
    picture = draw.schedule(CHAIN, fused, {"N": 4})
    assert picture.counts == {"instances": 7, "steps": 7, "recomputed": 0}


def test_recomputed_instances_are_marked() -> None:
    # the consumer recomputes the producer's value it needs from its left neighbour
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
    picture = draw.schedule(CHAIN, again, {"N": 4})
    assert picture.counts["recomputed"] == 3
    assert sum(len(c.get_offsets()) for c in picture.artists("recomputed")) == 3


def test_a_program_that_runs_other_instances_is_refused() -> None:
    shorter = polyir.parse(str(SMOOTH).replace("for j = 1 to m", "for j = 2 to m"))
    with pytest.raises(DrawError, match="never runs S0"):
        draw.schedule(SMOOTH, shorter, {"n": 4, "m": 4})
    other = polyir.parse(str(SMOOTH).replace("* 0.5:f64", "* 0.5:f64\n      S1: A[0, 0] = 1.0:f64"))
    with pytest.raises(DrawError, match="does the work of no instance"):
        draw.schedule(SMOOTH, other, {"n": 3, "m": 3})


# ------------------------------------------------------------------ tiles
TILED = polyir.parse("""
func smooth(A: f64[n, m]) {
  for ii = 1 to n step 3 {
    for jj = 1 to m step 3 {
      for i = ii to min(ii + 3, n) {
        for j = jj to min(jj + 3, m) {
          S0: A[i, j] = (A[i - 1, j] + A[i, j - 1]) * 0.5:f64
        }
      }
    }
  }
}""")


def test_tiles_are_outlined_one_rectangle_each() -> None:
    assert_equivalent(SMOOTH, TILED)
    sizes = {"n": 9, "m": 7}
    picture = draw.tiles(SMOOTH, TILED, sizes)
    # oracle: tiles of 3 x 3 over i in 1..8 (3 tiles) and j in 1..6 (2 tiles)
    assert picture.counts["tiles"] == 6 == len(picture.artists("tile")) - len(picture.artists("tile-order"))
    assert drawn_points(picture) == 8 * 6
    boxes = sorted((round(r.get_x() + 0.38), round(r.get_y() + 0.38), round(r.get_width() - 0.76),
                    round(r.get_height() - 0.76)) for r in picture.artists("tile") if hasattr(r, "get_width"))
    assert boxes == sorted((1 + 3 * a, 1 + 3 * b, min(3, 8 - 3 * a) - 1, 2) for a in range(3) for b in range(2))
    assert draw.tiles(SMOOTH, TILED, sizes, loops=["ii"]).counts["tiles"] == 3
    with pytest.raises(DrawError, match="nothing looks tiled"):
        draw.tiles(SMOOTH, WAVE, sizes)


def test_pictures_save_as_png_and_svg_and_the_same_twice(tmp_path) -> None:
    picture = draw.domain(SMOOTH, {"n": 4, "m": 4})
    png = picture.save(tmp_path / "d.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    svg = picture.save(tmp_path / "d.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    # no date, version or random id in the files: a fresh drawing gives the same bytes
    assert draw.domain(SMOOTH, {"n": 4, "m": 4}).render("png") == png
    assert len(repr(picture)) < 160 and "9 instances" in repr(picture)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.png", "d.svg"]


def test_drawing_needs_no_display_and_no_pyplot(tmp_path) -> None:
    import os
    import subprocess
    import sys
    script = ("import sys, polyir\nfrom polyir import draw\n"
              "m = polyir.parse(open(sys.argv[1]).read())\n"
              "draw.domain(m, {'M': 2, 'N': 2, 'K': 2}).save(sys.argv[2])\n"
              "assert 'matplotlib.pyplot' not in sys.modules\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "MPLBACKEND", "WAYLAND_DISPLAY")}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root
    source = tmp_path / "m.ir"
    source.write_text(str(MATMUL))
    subprocess.run([sys.executable, "-c", script, str(source), str(tmp_path / "m.png")], check=True,
                   env=env, timeout=120)
    assert (tmp_path / "m.png").stat().st_size > 1000
