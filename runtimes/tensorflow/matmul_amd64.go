//go:build amd64 && !purego

package tensorflow

// hasGemm4x4 reports that gemm4x4 is the SSE kernel.
const hasGemm4x4 = true

//go:noescape
func gemm4x4(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int)

//go:noescape
func gemm4x8(c *float32, ldc int, a *float32, lda int, panel0, panel1 *float32, k int, bias *float32, relu int)
