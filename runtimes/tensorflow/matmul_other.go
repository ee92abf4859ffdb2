//go:build !amd64 || purego

package tensorflow

const hasGemm4x4 = false

var useGemm4x16 = false

func gemm4x4(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int) {
	panic("gemm4x4 is amd64 only")
}

func gemm4x8(c *float32, ldc int, a *float32, lda int, panel0, panel1 *float32, k int, bias *float32, relu int) {
	panic("gemm4x8 is amd64 only")
}

func gemm4x16(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int) {
	panic("gemm4x16 is amd64 only")
}

var useGemm512 = false

func gemm512r8(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r8 is amd64 only")
}

func gemm512r4(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r4 is amd64 only")
}

func gemm512r2(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r2 is amd64 only")
}

func gemm512r1(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r1 is amd64 only")
}

func gemm512r1x4(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r1x4 is amd64 only")
}

func gemm512r8FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r8FMA is amd64 only")
}

func gemm512r4FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r4FMA is amd64 only")
}

func gemm512r2FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r2FMA is amd64 only")
}

func gemm512r1FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r1FMA is amd64 only")
}

func gemm512r1x4FMA(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int) {
	panic("gemm512r1x4FMA is amd64 only")
}
