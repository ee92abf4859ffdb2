package pytorch

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

func TestPreflightAcceptsEveryTestModel(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.pt"))
	// The reference models too, when INFERBID_REFERENCE_MODELS is set.
	if dir, ok := testhelp.LookupReferenceModels(t); ok {
		ref, _ := filepath.Glob(filepath.Join(dir, "bidding-auction-servers", "pytorch", "*.pt"))
		if len(ref) == 0 {
			t.Fatalf("no .pt files under %s", filepath.Join(dir, "bidding-auction-servers", "pytorch"))
		}
		paths = append(paths, ref...)
	}
	if len(paths) < 10 {
		t.Fatalf("found %d models", len(paths))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := preflight(b); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// rewrite returns the model with one entry's content replaced (stored).
func rewrite(t *testing.T, model []byte, suffix string, edit func([]byte) []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(model), int64(len(model)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	found := false
	for _, f := range zr.File {
		rc, _ := f.Open()
		var b bytes.Buffer
		b.ReadFrom(rc)
		rc.Close()
		data := b.Bytes()
		if strings.HasSuffix(f.Name, suffix) {
			data = edit(append([]byte(nil), data...))
			found = true
		}
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Store})
		w.Write(data)
	}
	zw.Close()
	if !found {
		t.Fatalf("no entry *%s", suffix)
	}
	return out.Bytes()
}

func TestPreflightRejects(t *testing.T) {
	model, err := os.ReadFile(filepath.Join("testdata", "affine_v1.pt"))
	if err != nil {
		t.Fatal(err)
	}
	// Sanity: rewriting without a change still passes.
	if err := preflight(rewrite(t, model, "data.pkl", func(b []byte) []byte { return b })); err != nil {
		t.Fatalf("unchanged rewrite: %v", err)
	}
	hugeString := func(b []byte) []byte {
		i := bytes.Index(b, []byte("X\x05\x00\x00\x00scale"))
		if i < 0 {
			t.Fatal("no BINUNICODE 'scale' in data.pkl")
		}
		copy(b[i+1:], []byte{0x01, 0x00, 0xf7, 0xff})
		return b
	}
	flipped := append([]byte(nil), model...)
	i := bytes.Index(flipped, []byte("scale"))
	flipped[i] ^= 0x20
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"4 GiB string in data.pkl", rewrite(t, model, "data.pkl", hugeString), "claims 4294377473 bytes"},
		{"no STOP", rewrite(t, model, "data.pkl", func(b []byte) []byte { return b[:len(b)-1] }), "no STOP"},
		{"unknown opcode", rewrite(t, model, "constants.pkl", func(b []byte) []byte { return append([]byte{0x80, 0x02, 0xff}, b...) }), "unknown opcode 0xff"},
		{"huge memo index", rewrite(t, model, "constants.pkl", func(b []byte) []byte { return append([]byte{0x80, 0x02, ')', 'r', 0xff, 0xff, 0xff, 0x7f}, b[2:]...) }), "memo index"},
		{"CRC mismatch", flipped, "checksum"},
		{"not a zip", []byte("hello"), "not a TorchScript file"},
	} {
		err := preflight(tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// FuzzPreflight: any bytes give nil or an error, quickly and without panics.
func FuzzPreflight(f *testing.F) {
	for _, name := range []string{"affine_v1.pt", "alldtypes.pt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		preflight(data)
		checkPickle(data)
	})
}
