package tensorflow

import (
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
)

// TestFusedMultiplyAddNeedsAVX512: on a CPU without the AVX-512 kernels the
// opt-in is refused when the runtime opens, naming the setting, instead of
// serving at a hundredth of the speed; the default still opens.
func TestFusedMultiplyAddNeedsAVX512(t *testing.T) {
	saved := useGemm512
	defer func() { useGemm512 = saved }()
	useGemm512 = false
	if rt, err := runtimes.Open(Name, runtimes.Config{FusedMultiplyAdd: true}); err == nil {
		rt.Close()
		t.Fatal("fused_multiply_add opened without AVX-512 kernels; want an error")
	} else if !strings.Contains(err.Error(), "fused_multiply_add") || !strings.Contains(err.Error(), "AVX-512") {
		t.Fatalf("error %q: want it to name fused_multiply_add and AVX-512", err)
	}
	rt, err := runtimes.Open(Name, runtimes.Config{})
	if err != nil {
		t.Fatalf("default config without AVX-512 kernels: %v", err)
	}
	rt.Close()
	useGemm512 = saved
	if !saved {
		t.Skip("this CPU has no AVX-512F: the opt-in cannot open here")
	}
	rt, err = runtimes.Open(Name, runtimes.Config{FusedMultiplyAdd: true})
	if err != nil {
		t.Fatalf("fused_multiply_add with AVX-512 kernels: %v", err)
	}
	rt.Close()
}
