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
