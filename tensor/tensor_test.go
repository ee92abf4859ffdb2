package tensor

import (
	"strings"
	"testing"
)

func TestNumElements(t *testing.T) {
	for _, c := range []struct {
		shape []int64
		max   int64
		want  int64
		err   string
	}{
		{nil, 0, 1, ""},
		{[]int64{2, 3}, 0, 6, ""},
		{[]int64{0}, 0, 0, ">= 1"},
		{[]int64{-1, 2}, 0, 0, ">= 1"},
		{[]int64{1 << 40, 1 << 40}, 0, 0, "more than"},
		{[]int64{1 << 62, 4}, 1 << 62, 0, "more than"},
		{[]int64{10, 10}, 99, 0, "more than 99"},
	} {
		n, err := NumElements(c.shape, c.max)
		if c.err == "" && (err != nil || n != c.want) {
			t.Errorf("NumElements(%v) = %d, %v; want %d", c.shape, n, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("NumElements(%v) error %v, want containing %q", c.shape, err, c.err)
		}
	}
}

func TestTensorHelpers(t *testing.T) {
	for _, d := range DTypes {
		p, ok := ParseDType(d.String())
		tt := Tensor{Shape: []int64{3}, Data: MakeData(d, 3)}
		if !ok || p != d || tt.DType() != d || tt.Len() != 3 || d.Size() == 0 {
			t.Errorf("dtype %v helpers disagree", d)
		}
	}
	if _, ok := ParseDType("BOOL"); ok {
		t.Error("BOOL is not a contract dtype")
	}
	f, ok := Data[float32](New("a", nil, []float32{1}))
	if !ok || f[0] != 1 {
		t.Error("Data[float32]")
	}
	nan := New("a", []int64{2}, []float32{1, float32(inf())})
	if !nan.HasNaNOrInf() {
		t.Error("HasNaNOrInf missed +Inf")
	}
}

func inf() float64 { var z float64; return 1 / z }

func TestAllDTypes(t *testing.T) {
	for _, d := range AllDTypes {
		tt := Tensor{Name: "x", Shape: []int64{3}, Data: MakeData(d, 3)}
		if tt.DType() != d || tt.Len() != 3 || tt.Validate(0) != nil {
			t.Errorf("dtype %v helpers disagree", d)
		}
		if d.Contract() != (d <= Int64) {
			t.Errorf("%v.Contract() = %v", d, d.Contract())
		}
		if _, ok := ParseDType(d.String()); ok != d.Contract() {
			t.Errorf("ParseDType(%q) ok = %v, want it only for the contract's six", d.String(), ok)
		}
		if (d.Size() == 0) != (d == Bytes) {
			t.Errorf("%v.Size() = %d", d, d.Size())
		}
	}
	if Half.String() != "FP16" || Bytes.String() != "BYTES" || Bool.String() != "BOOL" {
		t.Errorf("names: %v %v %v", Half, Bytes, Bool)
	}
	big := New("blob", []int64{2}, [][]byte{make([]byte, DefaultMaxBytes), {1}})
	if err := big.Validate(0); err == nil || !strings.Contains(err.Error(), "BYTES content is over") {
		t.Errorf("Validate of %d bytes: %v", DefaultMaxBytes+1, err)
	}
	if !New("h", []int64{2}, []Float16{0x3c00, 0x7e00}).HasNaNOrInf() || New("h", []int64{1}, []Float16{0xfbff}).HasNaNOrInf() {
		t.Error("Float16 HasNaNOrInf")
	}
}

// TestFloat16Conversions: every binary16 bit pattern survives Float32 and
// back (NaNs stay NaN), and rounding is to nearest, ties to even.
func TestFloat16Conversions(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := Float16(b)
		f := h.Float32()
		back := Float16FromFloat32(f)
		if h.IsNaNOrInf() && h&0x3ff != 0 {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", b, uint16(back))
			}
			continue
		}
		if back != h {
			t.Fatalf("%#04x -> %v -> %#04x", b, f, uint16(back))
		}
	}
	for _, c := range []struct {
		f    float32
		want Float16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00},
		{1 + 1.0/2048, 0x3c00},           // a tie: to even (down)
		{1 + 3.0/2048, 0x3c02},           // a tie: to even (up)
		{5.960464477539063e-08, 0x0001},  // the smallest subnormal
		{2.9802322387695312e-08, 0x0000}, // half of it: a tie, to even (zero)
		{1e-10, 0},
	} {
		if got := Float16FromFloat32(c.f); got != c.want {
			t.Errorf("Float16FromFloat32(%v) = %#04x, want %#04x", c.f, uint16(got), uint16(c.want))
		}
	}
}
