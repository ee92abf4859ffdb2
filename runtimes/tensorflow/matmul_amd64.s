//go:build amd64 && !purego

#include "textflag.h"

// func gemm4x4(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int)
//
// c[r*ldc+j] = sum over p<k of a[r*lda+p]*panel[p*4+j], r, j < 4, each lane
// accumulated in float32 in index order of p with MULPS then ADDPS (no
// fused multiply-add): exactly the scalar kernel's rounding, four lanes at
// a time. A non-nil bias (4 floats) is then added, and relu clamps at +0,
// as separate BiasAdd and Relu ops would.
TEXT ·gemm4x4(SB), NOSPLIT, $0-64
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ lda+24(FP), R9
	MOVQ panel+32(FP), DX
	MOVQ k+40(FP), CX
	SHLQ $2, R8
	SHLQ $2, R9
	LEAQ (SI)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12
	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3

loop:
	TESTQ CX, CX
	JE    done
	MOVUPS (DX), X4
	MOVSS  (SI), X5
	SHUFPS $0, X5, X5
	MULPS  X4, X5
	ADDPS  X5, X0
	MOVSS  (R10), X6
	SHUFPS $0, X6, X6
	MULPS  X4, X6
	ADDPS  X6, X1
	MOVSS  (R11), X7
	SHUFPS $0, X7, X7
	MULPS  X4, X7
	ADDPS  X7, X2
	MOVSS  (R12), X8
	SHUFPS $0, X8, X8
	MULPS  X4, X8
	ADDPS  X8, X3
	ADDQ   $16, DX
	ADDQ   $4, SI
	ADDQ   $4, R10
	ADDQ   $4, R11
	ADDQ   $4, R12
	DECQ   CX
	JMP    loop

done:
	MOVQ  bias+48(FP), AX
	TESTQ AX, AX
	JE    nobias4
	MOVUPS (AX), X8
	ADDPS X8, X0
	ADDPS X8, X1
	ADDPS X8, X2
	ADDPS X8, X3

nobias4:
	MOVQ  relu+56(FP), AX
	TESTQ AX, AX
	JE    store4
	XORPS X10, X10
	MAXPS X10, X0
	MAXPS X10, X1
	MAXPS X10, X2
	MAXPS X10, X3

store4:
	MOVUPS X0, (DI)
	ADDQ   R8, DI
	MOVUPS X1, (DI)
	ADDQ   R8, DI
	MOVUPS X2, (DI)
	ADDQ   R8, DI
	MOVUPS X3, (DI)
	RET

// func gemm4x8(c *float32, ldc int, a *float32, lda int, panel0, panel1 *float32, k int, bias *float32, relu int)
//
// gemm4x4 over two panels (eight columns) at once, sharing the broadcast
// of each a element.
TEXT ·gemm4x8(SB), NOSPLIT, $0-72
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ lda+24(FP), R9
	MOVQ panel0+32(FP), DX
	MOVQ panel1+40(FP), BX
	MOVQ k+48(FP), CX
	SHLQ $2, R8
	SHLQ $2, R9
	LEAQ (SI)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12
	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3
	XORPS X4, X4
	XORPS X5, X5
	XORPS X6, X6
	XORPS X7, X7

loop8:
	TESTQ CX, CX
	JE    done8
	MOVUPS (DX), X8
	MOVUPS (BX), X9
	MOVSS  (SI), X10
	SHUFPS $0, X10, X10
	MOVAPS X10, X11
	MULPS  X8, X10
	MULPS  X9, X11
	ADDPS  X10, X0
	ADDPS  X11, X4
	MOVSS  (R10), X10
	SHUFPS $0, X10, X10
	MOVAPS X10, X11
	MULPS  X8, X10
	MULPS  X9, X11
	ADDPS  X10, X1
	ADDPS  X11, X5
	MOVSS  (R11), X10
	SHUFPS $0, X10, X10
	MOVAPS X10, X11
	MULPS  X8, X10
	MULPS  X9, X11
	ADDPS  X10, X2
	ADDPS  X11, X6
	MOVSS  (R12), X10
	SHUFPS $0, X10, X10
	MOVAPS X10, X11
	MULPS  X8, X10
	MULPS  X9, X11
	ADDPS  X10, X3
	ADDPS  X11, X7
	ADDQ   $16, DX
	ADDQ   $16, BX
	ADDQ   $4, SI
	ADDQ   $4, R10
	ADDQ   $4, R11
	ADDQ   $4, R12
	DECQ   CX
	JMP    loop8

done8:
	MOVQ  bias+56(FP), AX
	TESTQ AX, AX
	JE    nobias8
	MOVUPS (AX), X8
	MOVUPS 16(AX), X9
	ADDPS X8, X0
	ADDPS X8, X1
	ADDPS X8, X2
	ADDPS X8, X3
	ADDPS X9, X4
	ADDPS X9, X5
	ADDPS X9, X6
	ADDPS X9, X7

nobias8:
	MOVQ  relu+64(FP), AX
	TESTQ AX, AX
	JE    store8
	XORPS X10, X10
	MAXPS X10, X0
	MAXPS X10, X1
	MAXPS X10, X2
	MAXPS X10, X3
	MAXPS X10, X4
	MAXPS X10, X5
	MAXPS X10, X6
	MAXPS X10, X7

store8:
	MOVUPS X0, (DI)
	MOVUPS X4, 16(DI)
	ADDQ   R8, DI
	MOVUPS X1, (DI)
	MOVUPS X5, 16(DI)
	ADDQ   R8, DI
	MOVUPS X2, (DI)
	MOVUPS X6, 16(DI)
	ADDQ   R8, DI
	MOVUPS X3, (DI)
	MOVUPS X7, 16(DI)
	RET

// func gemm4x16(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int)
//
// gemm4x4 for 16 columns, the four consecutive packed panels starting at
// panel, with AVX: VMULPS then VADDPS per lane (no fused multiply-add), so
// every element is rounded exactly as in gemm4x4 and the scalar kernel.
// Callers check for AVX. A non-nil bias holds 16 floats.
TEXT ·gemm4x16(SB), NOSPLIT, $0-64
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ lda+24(FP), R9
	MOVQ panel+32(FP), DX
	MOVQ k+40(FP), CX
	SHLQ $2, R8
	SHLQ $2, R9
	MOVQ CX, AX
	SHLQ $4, AX // bytes per panel
	LEAQ (DX)(AX*1), BX
	LEAQ (BX)(AX*1), R13
	LEAQ (R13)(AX*1), R14
	LEAQ (SI)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

loop16:
	TESTQ CX, CX
	JE    done16
	VMOVUPS      (DX), X8
	VINSERTF128  $1, (BX), Y8, Y8
	VMOVUPS      (R13), X9
	VINSERTF128  $1, (R14), Y9, Y9
	VBROADCASTSS (SI), Y10
	VMULPS       Y8, Y10, Y11
	VMULPS       Y9, Y10, Y12
	VADDPS       Y11, Y0, Y0
	VADDPS       Y12, Y4, Y4
	VBROADCASTSS (R10), Y10
	VMULPS       Y8, Y10, Y11
	VMULPS       Y9, Y10, Y12
	VADDPS       Y11, Y1, Y1
	VADDPS       Y12, Y5, Y5
	VBROADCASTSS (R11), Y10
	VMULPS       Y8, Y10, Y11
	VMULPS       Y9, Y10, Y12
	VADDPS       Y11, Y2, Y2
	VADDPS       Y12, Y6, Y6
	VBROADCASTSS (R12), Y10
	VMULPS       Y8, Y10, Y11
	VMULPS       Y9, Y10, Y12
	VADDPS       Y11, Y3, Y3
	VADDPS       Y12, Y7, Y7
	ADDQ         $16, DX
	ADDQ         $16, BX
	ADDQ         $16, R13
	ADDQ         $16, R14
	ADDQ         $4, SI
	ADDQ         $4, R10
	ADDQ         $4, R11
	ADDQ         $4, R12
	DECQ         CX
	JMP          loop16

done16:
	MOVQ  bias+48(FP), AX
	TESTQ AX, AX
	JE    nobias16
	VMOVUPS (AX), Y8
	VMOVUPS 32(AX), Y9
	VADDPS  Y8, Y0, Y0
	VADDPS  Y8, Y1, Y1
	VADDPS  Y8, Y2, Y2
	VADDPS  Y8, Y3, Y3
	VADDPS  Y9, Y4, Y4
	VADDPS  Y9, Y5, Y5
	VADDPS  Y9, Y6, Y6
	VADDPS  Y9, Y7, Y7

nobias16:
	MOVQ  relu+56(FP), AX
	TESTQ AX, AX
	JE    store16
	VXORPS Y10, Y10, Y10
	VMAXPS Y10, Y0, Y0
	VMAXPS Y10, Y1, Y1
	VMAXPS Y10, Y2, Y2
	VMAXPS Y10, Y3, Y3
	VMAXPS Y10, Y4, Y4
	VMAXPS Y10, Y5, Y5
	VMAXPS Y10, Y6, Y6
	VMAXPS Y10, Y7, Y7

store16:
	VMOVUPS Y0, (DI)
	VMOVUPS Y4, 32(DI)
	ADDQ    R8, DI
	VMOVUPS Y1, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ    R8, DI
	VMOVUPS Y2, (DI)
	VMOVUPS Y6, 32(DI)
	ADDQ    R8, DI
	VMOVUPS Y3, (DI)
	VMOVUPS Y7, 32(DI)
	VZEROUPPER
	RET
