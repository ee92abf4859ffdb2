//go:build amd64 && !purego

package tensorflow

import "golang.org/x/sys/cpu"

// hasGemm4x4 reports that gemm4x4 is the SSE kernel.
const hasGemm4x4 = true

// useGemm4x16 reports that the CPU (and OS) run AVX, so matmul32 may use
// gemm4x16; a variable so tests can compare it with the SSE kernels.
var useGemm4x16 = cpu.X86.HasAVX

//go:noescape
func gemm4x4(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int)

//go:noescape
func gemm4x8(c *float32, ldc int, a *float32, lda int, panel0, panel1 *float32, k int, bias *float32, relu int)

//go:noescape
func gemm4x16(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int)

// useGemm512 reports that the CPU (and OS) run AVX-512F, so MatMul packs
// its weights in 32-column panels for the gemm512 kernels; a variable so
// tests can compare them with the AVX and SSE kernels.
var useGemm512 = cpu.X86.HasAVX512F

//go:generate go run gen_gemm512.go

//go:noescape
func gemm512r8(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

//go:noescape
func gemm512r4(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

//go:noescape
func gemm512r2(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

//go:noescape
func gemm512r1(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

// gemm512r1x4 is gemm512r1 over four consecutive full panels (128
// columns); mask is ignored.
//
//go:noescape
func gemm512r1x4(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

// The FMA kernels are the ones above with VFMADD231PS (one rounding per
// step, as fma32) in place of VMULPS then VADDPS: the fused_multiply_add
// opt-in only, since they round differently from TensorFlow's kernels.

//go:noescape
func gemm512r8FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

//go:noescape
func gemm512r4FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

//go:noescape
func gemm512r2FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

//go:noescape
func gemm512r1FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)

//go:noescape
func gemm512r1x4FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)
