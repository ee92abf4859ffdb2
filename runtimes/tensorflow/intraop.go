package tensorflow

import (
	"fmt"
	"runtime"
	"sync"
)

// intraop holds a program's float32 MatMul settings from the runtime
// config. threads is num_intraop_threads: how many goroutines one large
// MatMul may split its output rows across. 0 means GOMAXPROCS (TensorFlow's
// 0 = all cores); 1 keeps every MatMul on the calling goroutine. fma is
// fused_multiply_add: every float32 MatMul and Conv2D-as-GEMM step is one
// fused multiply-add (fma32) instead of a rounded multiply then add.
type intraop struct {
	threads int
	fma     bool
}

// intraop returns the program's setting, shared by its kernels, so that
// Load can set it after compiling.
func (p *program) intraop() *intraop {
	if p.par == nil {
		p.par = &intraop{}
	}
	return p.par
}

// parallelMinWork is the number of multiply-adds (m·k·n) below which a
// MatMul stays on one goroutine: starting and joining goroutines costs a
// few microseconds, more than small MatMuls (batch-1 serving) take.
// parallelMinChunk is the least work each goroutine gets.
const (
	parallelMinWork  = 1 << 20
	parallelMinChunk = 1 << 18
)

// workers returns how many goroutines an m×k·k×n MatMul uses.
func (p *intraop) workers(m, k, n int) int {
	if p == nil || p.threads == 1 {
		return 1
	}
	work := m * k * n
	if work < parallelMinWork {
		return 1
	}
	t := p.threads
	if t <= 0 {
		t = runtime.GOMAXPROCS(0)
	}
	return max(1, min(t, (m+3)/4, work/parallelMinChunk))
}

// splitRows runs fn over [0,m) in w row blocks, each on its own goroutine
// but the first, which runs on the caller. Blocks start at multiples of 4,
// so that rows mostly meet the same kernel block as in the serial call;
// results are bit-identical either way, since every kernel (AVX-512 8, 4,
// 2 or 1 rows, SSE/AVX 4 rows, Go 2 or 1 rows) computes each element the
// same way. It returns when every block is done; a panic in a block is
// re-raised on the caller, where the program's recover reports it.
func splitRows(m, w int, fn func(lo, hi int)) {
	if w <= 1 || m <= 4 {
		fn(0, m)
		return
	}
	chunk := ((m+w-1)/w + 3) &^ 3
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		panicked any
	)
	for lo := chunk; lo < m; lo += chunk {
		hi := min(lo+chunk, m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					panicked = fmt.Sprintf("MatMul rows %d..%d: %v", lo, hi, r)
					mu.Unlock()
				}
			}()
			fn(lo, hi)
		}()
	}
	fn(0, min(chunk, m))
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
}

// matmul32Par is gemm32 split by output rows across p's goroutines.
// The serial case calls the kernel directly: the closure would escape to
// the heap, an allocation per call.
func matmul32Par(p *intraop, o, a []float32, pb packedB, m, k, n int, e *epilogue) {
	w := p.workers(m, k, n)
	if w <= 1 {
		gemm32(o, a, pb, m, k, n, e, p.fused())
		return
	}
	fma := p.fused()
	splitRows(m, w, func(lo, hi int) {
		gemm32(o[lo*n:hi*n], a[lo*k:hi*k], pb, hi-lo, k, n, e, fma)
	})
}

// matvec32Par is matvec32 (matvec32FMA under the opt-in) split by output
// rows across p's goroutines.
func matvec32Par(p *intraop, o, a, b []float32, m, k int) {
	mv := matvec32
	if p.fused() {
		mv = matvec32FMA
	}
	w := p.workers(m, k, 1)
	if w <= 1 {
		mv(o, a, b, m, k)
		return
	}
	splitRows(m, w, func(lo, hi int) {
		mv(o[lo:hi], a[lo*k:hi*k], b, hi-lo, k)
	})
}

// fused reports the fused_multiply_add opt-in; a nil p is off.
func (p *intraop) fused() bool { return p != nil && p.fma }
