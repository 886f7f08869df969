// tokscope replay: the non-matmul pieces of a Llama layer, compiled at run
// time with NVRTC (matmuls are cuBLAS). Each kernel mirrors the float32 order
// of operations of src/replay/kernels.rs (itself transformers' order).
//
// Every kernel takes its shape (rows, positions) at run time and reduces one
// row inside one block in a fixed tree order, never reading the grid's size,
// so a row's result does not depend on how many rows run together
// (tests/model/cuda_kernels.rs checks the PTX). TOKSCOPE_BLOCK is the launch's
// block size, kernels::BLOCK on the Rust side.
#define TOKSCOPE_BLOCK 256

// Block-wide sum in a fixed tree order; every thread gets the result.
__device__ float block_sum(float v) {
    __shared__ float buf[TOKSCOPE_BLOCK];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = TOKSCOPE_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

// Block-wide maximum; every thread gets the result.
__device__ float block_max(float v) {
    __shared__ float buf[TOKSCOPE_BLOCK];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = TOKSCOPE_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

// RMSNorm, one block per row: y = w * (x * 1/sqrt(mean(x^2) + eps)).
extern "C" __global__ void rms_norm(const float* x, const float* w, float* y, int dim, float eps) {
    const float* row = x + (size_t)blockIdx.x * dim;
    float* out = y + (size_t)blockIdx.x * dim;
    float acc = 0.0f;
    for (int i = threadIdx.x; i < dim; i += TOKSCOPE_BLOCK) acc += row[i] * row[i];
    float mean_square = block_sum(acc) / (float)dim;
    float scale = 1.0f / sqrtf(mean_square + eps);
    for (int i = threadIdx.x; i < dim; i += TOKSCOPE_BLOCK) out[i] = w[i] * (row[i] * scale);
}

// RoPE in the Hugging Face half layout (j pairs with j + head_dim/2), in place.
// Grid (tokens, heads). The angle is formed in f32 (position * inv_freq), its
// cos/sin in double, like the CPU path.
extern "C" __global__ void rope(float* x, const float* inv_freq, int n_heads, int head_dim, int start_pos) {
    int half = head_dim / 2;
    float* head = x + ((size_t)blockIdx.x * n_heads + blockIdx.y) * head_dim;
    float position = (float)(start_pos + (int)blockIdx.x);
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
        double angle = (double)(position * inv_freq[j]);
        float c = (float)cos(angle), s = (float)sin(angle);
        float lo = head[j], hi = head[j + half];
        head[j] = lo * c - hi * s;
        head[j + half] = hi * c + lo * s;
    }
}

// Causal attention with grouped KV heads. Grid (tokens, heads), TOKSCOPE_BLOCK
// threads, dynamic shared memory of (start_pos + tokens) floats for the scores.
// Token t of this call sits at position start_pos + t and sees positions 0..=it.
extern "C" __global__ void attention(const float* q, const float* k_cache, const float* v_cache, float* out,
                                     int n_heads, int n_kv_heads, int head_dim, int start_pos, float scale) {
    extern __shared__ float scores[];
    int t = blockIdx.x, h = blockIdx.y;
    int kv_head = h / (n_heads / n_kv_heads);
    int kv_width = n_kv_heads * head_dim;
    int len = start_pos + t + 1;
    const float* qh = q + ((size_t)t * n_heads + h) * head_dim;
    for (int p = threadIdx.x; p < len; p += TOKSCOPE_BLOCK) {
        const float* kp = k_cache + (size_t)p * kv_width + kv_head * head_dim;
        float dot = 0.0f;
        for (int d = 0; d < head_dim; d++) dot += qh[d] * kp[d];
        scores[p] = dot * scale;
    }
    __syncthreads();
    float m = __int_as_float(0xff800000);  // -inf (NVRTC has no math.h INFINITY)
    for (int p = threadIdx.x; p < len; p += TOKSCOPE_BLOCK) m = fmaxf(m, scores[p]);
    m = block_max(m);
    float sum = 0.0f;
    for (int p = threadIdx.x; p < len; p += TOKSCOPE_BLOCK) {
        float e = expf(scores[p] - m);
        scores[p] = e;
        sum += e;
    }
    sum = block_sum(sum);  // its barriers also publish every score
    for (int d = threadIdx.x; d < head_dim; d += TOKSCOPE_BLOCK) {
        float acc = 0.0f;
        for (int p = 0; p < len; p++) acc += (scores[p] / sum) * v_cache[(size_t)p * kv_width + kv_head * head_dim + d];
        out[((size_t)t * n_heads + h) * head_dim + d] = acc;
    }
}

// SwiGLU: out = silu(gate) * up, element-wise over n values.
extern "C" __global__ void swiglu(const float* gate, const float* up, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = gate[i];
        out[i] = (g / (1.0f + expf(-g))) * up[i];
    }
}

// Residual add: x += y over n values.
extern "C" __global__ void add_in_place(float* x, const float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

// Bias add: y[r, i] += b[i] for rows x width values.
extern "C" __global__ void add_bias(float* y, const float* b, int width, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += b[i % width];
}
