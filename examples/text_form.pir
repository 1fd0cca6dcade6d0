func gemm(C: f32[N, M], A: f32[N, K], B: f32[K, M], alpha: f32[], n: index) {
  local t: f32[]
  local tile: f16[16, 16] @shared
  for i = 0 to N {
    for j = max(0, i - 1) to min(M, i + 3) step 2 parallel unroll=4 vectorize=8 gpu=block.x {
      S0: C[i, j] = C[i, j] * alpha[] + cast<f32>(i)
      if (i >= j, i + j < N) {
        S1: t[] = exp(A[i, 0]) + cast<f32>(1.5:f64)
      } else {
        S2: t[] = select(A[i, 0] > 0.0, 1.0, -2.0)
      }
    }
  }
}

kernel k0(A: f32[N], n: index) {
  for b = 0 to (N + 31) // 32 gpu=block.x {
    for t = 0 to 32 gpu=thread.x {
      if (32*b + t < N) {
        S0: A[32*b + t] = 0.0
      }
    }
  }
}
