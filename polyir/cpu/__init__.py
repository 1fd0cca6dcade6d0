"""Native CPU backend: host JIT (``jit.build_cpu``), compile cache, parallel runtime."""
