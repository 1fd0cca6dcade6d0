"""``polyir.jax.jit`` as an API: pytrees, the per-signature cache, inputs and
outputs, static arguments, the JAX fallback, errors, and no torch."""
from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from jax_support import assert_close, check, jax, jnp, rand

import polyir
from polyir.frontends.jax import PolyirJaxFallbackWarning
from polyir.frontends.jax.plan import JaxSegment, aligned_empty, host_array, to_jax

ROOT = Path(__file__).resolve().parents[2]


def test_pytrees_in_and_out_and_the_decorator_forms() -> None:
    @polyir.jax.jit
    def step(params: dict, batch: tuple) -> dict:
        x, y = batch
        prediction = x @ params["w"] + params["b"]
        return {"loss": jnp.mean((prediction - y) ** 2), "parts": [prediction, (x.sum(), None)]}

    params = {"w": rand((4, 3), seed=1), "b": rand((3,), seed=2)}
    batch = (jnp.asarray(rand((5, 4), seed=3)), rand((5, 3), seed=4))
    assert_close(step(params, batch), jax.jit(step.__wrapped__)(params, batch))
    assert step.__name__ == "step"

    @polyir.jax.jit(target="interpret")
    def double(x: jax.Array) -> jax.Array:
        return 2 * x
    assert_close(double(np.arange(3.0, dtype=np.float32)), jnp.arange(3.0, dtype=jnp.float32) * 2)


def test_cache_per_signature() -> None:
    compiled = polyir.jax.jit(lambda x, y: x * y + 1)
    a, b = rand((2, 3)), rand((2, 3), seed=1)
    compiled(a, b)
    compiled(jnp.asarray(a), jnp.asarray(b))            # numpy or JAX: the same signature
    assert len(compiled.plans) == 1
    compiled(rand((4, 3)), rand((4, 3), seed=1))        # new shape
    compiled(a.astype(np.int32), b.astype(np.int32))    # new dtype
    compiled(a, 2.0)                                    # a Python number is a weak-typed scalar
    assert len(compiled.plans) == 4
    assert_close(compiled(a, 2.0), a * 2.0 + 1)


def test_static_arguments_and_keywords() -> None:
    def scaled(x: jax.Array, power: int, *, axis: int = 0, bias: jax.Array) -> jax.Array:
        return (x ** power).sum(axis=axis) + bias

    compiled = polyir.jax.jit(scaled, static_argnums=1, static_argnames="axis")
    x, bias = rand((3, 4)), rand((4,), seed=1)
    assert_close(compiled(x, 2, bias=bias), jax.jit(scaled, static_argnums=1, static_argnames="axis")(x, 2, bias=bias))
    assert_close(compiled(x, 3, axis=0, bias=bias), (x ** 3).sum(0) + bias, rtol=1e-5, atol=1e-5)
    assert len(compiled.plans) == 2


def test_outputs_are_jax_arrays_taken_over_without_a_copy() -> None:
    out = aligned_empty((256, 257), np.float32)   # over ADOPT_BYTES: adopted
    out[...] = 1.5
    adopted = to_jax(out, out.dtype)
    assert isinstance(adopted, jax.Array)
    assert adopted.unsafe_buffer_pointer() == out.ctypes.data
    small = aligned_empty((3, 5), np.float32)     # small: jnp.asarray, cheaper than DLPack
    small[...] = 2.5
    assert float(to_jax(small, small.dtype)[2, 4]) == 2.5
    caller = aligned_empty((256, 257), np.float32)
    caller[...] = 1.0
    kept = to_jax(caller, caller.dtype, adopt=False)  # not polyir's buffer: always a copy
    caller[0, 0] = 7.0
    assert float(kept[0, 0]) == 1.0
    # A large model output comes back in the buffer polyir wrote.
    compiled = polyir.jax.jit(lambda v: v * 2)
    result = compiled(rand((300, 301)))
    assert_close(result, rand((300, 301)) * 2)
    x = jnp.arange(6.0).reshape(2, 3)
    assert host_array(x, x.dtype).ctypes.data == x.unsafe_buffer_pointer()  # inputs: a view


def test_an_input_returned_as_it_is_is_copied() -> None:
    x = rand((4, 16))
    same, doubled = polyir.jax.jit(lambda v: (v, v * 2))(x)
    x[0, 0] = 1000.0
    assert float(same[0, 0]) != 1000.0 and float(doubled[0, 0]) != 2000.0


def test_inputs_outputs_constants_and_empty_arrays() -> None:
    table = rand((4, 3), seed=5)  # closed over: a constant of the jaxpr

    def fn(x: jax.Array, empty: jax.Array) -> tuple:
        return x, 1.0, x @ table, empty * 2, jnp.zeros((2, 0)).sum(axis=1)
    check(fn, rand((2, 4)), np.zeros((0, 3), np.float32))


def test_fallback_runs_unsupported_primitives_in_jax_with_one_warning() -> None:
    def fn(x: jax.Array) -> jax.Array:
        y = jnp.tanh(x) * 2
        z = jnp.sort(y, axis=-1)                        # no lowering: runs in JAX
        w = jax.lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1, z)   # a scan
        u = jax.lax.while_loop(lambda v: v.sum() < 50.0, lambda v: v * 2.0 + 1.0, jnp.abs(w))
        return jnp.exp(w) + u + y.astype(jnp.uint8).astype(jnp.float32)

    x = rand((3, 6))
    compiled = polyir.jax.jit(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = compiled(x)
        compiled(x)                                     # cached: no second warning
    fallback = [w for w in caught if issubclass(w.category, PolyirJaxFallbackWarning)]
    assert len(fallback) == 1
    message = str(fallback[0].message)
    for name in ("sort", "scan", "while", "convert_element_type", "dtype uint8"):
        assert name in message
    assert "test_jax_api.py" in message                 # names where in the user's code
    assert_close(got, jax.jit(fn)(x))
    summary = compiled.summary()
    assert set(summary["fallbacks"]) == {"sort", "scan", "while", "convert_element_type"}
    assert summary["functions"] >= 2 and "tanh" in summary["ops"] and "exp" in summary["ops"]
    # Consecutive JAX-run equations share one jax.jit call.
    plan = compiled.last_plan
    assert plan is not None
    jax_runs = [s for s in plan.steps if isinstance(s, JaxSegment)]
    assert 1 <= len(jax_runs) < len(plan.fallbacks)


def test_fallback_false_raises_unsupported_op_naming_primitive_and_equation() -> None:
    compiled = polyir.jax.jit(lambda x: jnp.sort(x) + 1, fallback=False)
    with pytest.raises(polyir.UnsupportedOp) as error:
        compiled(rand((5,)))
    assert error.value.op == "sort"
    assert "sort[" in error.value.node and "test_jax_api.py" in error.value.node
    assert error.value.detail == "no lowering rule"


def test_refusals_name_their_reason() -> None:
    with pytest.raises(polyir.UnsupportedOp, match="bitwise and on i32"):
        polyir.jax.jit(lambda a, b: a & b, fallback=False)(rand((3,), "int32"), rand((3,), "int32"))
    with pytest.raises(polyir.UnsupportedOp, match="dtype uint8"):
        polyir.jax.jit(lambda a: a.astype(jnp.uint8), fallback=False)(rand((3,)))


def test_bad_arguments_are_argument_errors() -> None:
    compiled = polyir.jax.jit(lambda x, name: x)
    with pytest.raises(polyir.ArgumentError, match="str"):
        compiled(rand((2,)), "hello")
    with pytest.raises(TypeError):
        polyir.jax.jit(42)


def test_pipeline_option_runs_passes() -> None:
    compiled = check(lambda x: jnp.exp(x) + x.sum(0), rand((6, 5)), pipeline="mark-parallel")
    assert compiled.summary()["loop_nests"] > 0


def test_the_jax_frontend_needs_no_torch(tmp_path: Path) -> None:
    script = tmp_path / "no_torch.py"
    script.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ImportError('torch is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import numpy as np, jax.numpy as jnp, polyir\n"
        "f = polyir.jax.jit(lambda x, w: jnp.tanh(x @ w).sum(-1), fallback=False, target='interpret')\n"
        "x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)\n"
        "np.testing.assert_allclose(np.asarray(f(x, w)), np.tanh(x @ w).sum(-1), rtol=1e-6)\n"
        "assert not any(m == 'torch' or m.startswith('torch.') for m in sys.modules)\n"
        "print('ok')\n")
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                              "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_jax_transformations_trace_the_original_function() -> None:
    def loss(w: jax.Array, x: jax.Array) -> jax.Array:
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    compiled = polyir.jax.jit(loss, target="interpret")
    w, x = rand((3, 2), seed=1), rand((4, 3), seed=2)
    assert_close(jax.grad(compiled)(w, x), jax.grad(loss)(w, x))
    assert_close(jax.jit(compiled)(w, x), jax.jit(loss)(w, x))
    assert_close(jax.vmap(compiled, in_axes=(None, 0))(w, x[:, None]),
                 jax.vmap(loss, in_axes=(None, 0))(w, x[:, None]))
    assert compiled.plans == {}  # nothing was compiled for tracers


def test_calls_are_inlined_even_when_one_jaxpr_is_called_twice() -> None:
    @jax.custom_vjp
    def clipped_sin(v: jax.Array) -> jax.Array:
        return jnp.sin(v)
    clipped_sin.defvjp(lambda v: (jnp.sin(v), v), lambda v, g: (jnp.clip(g * jnp.cos(v), -1, 1),))

    helper = jax.jit(lambda v: v * 2 + 1)            # one jaxpr, called twice

    def fn(x: jax.Array, y: jax.Array) -> jax.Array:
        z = helper(x) + helper(y)
        z = jax.checkpoint(lambda v: jnp.tanh(v) * v)(z)
        return clipped_sin(z) + jax.nn.relu(z) + jax.nn.silu(z)   # custom_vjp, custom_jvp

    compiled = check(fn, rand((3, 4), seed=1), rand((3, 4), seed=2), ops=["mul", "tanh", "sin"])
    names = set(compiled.summary()["ops"])
    assert not names & {"jit", "pjit", "custom_jvp_call", "custom_vjp_call", "remat2", "checkpoint"}
    assert compiled.summary()["ops"]["mul"] >= 4       # both calls of the helper were inlined
