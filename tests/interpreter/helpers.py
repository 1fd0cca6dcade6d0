"""Shared helpers for the interpreter tests."""
from __future__ import annotations

from typing import Any

import numpy as np

from polyir.ir.interpreter import interpret
from polyir.ir.nodes import Module
from polyir.ir.parser import parse


def ir(text: str) -> Module:
    """Parse IR text (the tests write IR in its text form)."""
    return parse(text)


def run(module: Module | str, *args: Any, **options: Any) -> None:
    interpret(ir(module) if isinstance(module, str) else module, *args, **options)


def rand(rng: np.random.Generator, *shape: int, dtype: Any = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)
