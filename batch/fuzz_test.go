package batch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/inferbid/inferbid/inferr"
)

// FuzzParse checks that Parse never panics, that everything it returns is
// typed and consistent, and that whatever it accepts renders to valid JSON
// which ParseResponse reads back to the same values (and renders again to
// the same bytes). The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"request":[{"model_path":"m/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,2],"tensor_content":["0.5",1e-3]}]}]}`))
	lim := Limits{MaxElements: 1 << 16, MaxEntries: 64, MaxTensors: 16}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := string(data)
		entries, err := Parse(data, lim)
		checkSameAsSlowPath(t, data, lim, entries, err)
		if string(data) != orig {
			t.Fatal("Parse wrote into its input (ParseString relies on it reading only)")
		}
		if fromString, errString := ParseString(orig, lim); fmt.Sprint(errString) != fmt.Sprint(err) || !reflect.DeepEqual(fromString, entries) {
			t.Fatalf("ParseString disagrees with Parse: %v %v vs %v %v", fromString, errString, entries, err)
		}
		if err != nil {
			if entries != nil || inferr.TypeOf(err) != inferr.InputParsing {
				t.Fatalf("whole-batch error %v (%v) with entries %v", err, inferr.TypeOf(err), entries)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("description is not UTF-8: %q", err)
			}
			if strings.Contains(err.Error(), "not valid JSON") && json.Valid(data) {
				t.Fatalf("gjson rejects what encoding/json accepts: %v", err)
			}
			_, back := ParseResponse(AppendBatchError(nil, err))
			if inferr.TypeOf(back) != inferr.InputParsing || back.Error() != err.Error() {
				t.Fatalf("batch error %v came back as %v", err, back)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("Parse accepted what encoding/json rejects")
		}
		if len(entries) > lim.MaxEntries {
			t.Fatalf("%d entries, limit %d", len(entries), lim.MaxEntries)
		}
		results := make([]Result, len(entries))
		for i, e := range entries {
			if e.Err != nil {
				if inferr.TypeOf(e.Err) != inferr.InputParsing || e.Tensors != nil || !utf8.ValidString(e.Err.Error()) {
					t.Fatalf("entry %d: error %v (%v), tensors %v", i, e.Err, inferr.TypeOf(e.Err), e.Tensors)
				}
			} else {
				if len(e.Tensors) > lim.MaxTensors {
					t.Fatalf("entry %d: %d tensors, limit %d", i, len(e.Tensors), lim.MaxTensors)
				}
				for _, tn := range e.Tensors {
					if err := tn.Validate(lim.MaxElements); err != nil || tn.HasNaNOrInf() {
						t.Fatalf("entry %d: accepted an invalid tensor %+v: %v", i, tn, err)
					}
					if !utf8.ValidString(tn.Name) {
						t.Fatalf("entry %d: tensor name %q is not UTF-8", i, tn.Name)
					}
				}
			}
			if !utf8.ValidString(e.ModelPath) {
				t.Fatalf("entry %d: model path %q is not UTF-8", i, e.ModelPath)
			}
			results[i] = Result(e)
		}
		out, err := AppendResponse(nil, results)
		if err != nil {
			t.Fatalf("accepted input does not render: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("rendered invalid JSON: %s", out)
		}
		back, err := ParseResponse(out)
		if err != nil {
			t.Fatalf("ParseResponse of our own output: %v\n%s", err, out)
		}
		if len(back) != len(results) {
			t.Fatalf("%d results back, want %d", len(back), len(results))
		}
		for i := range results {
			got, want := back[i], results[i]
			if got.ModelPath != want.ModelPath {
				t.Fatalf("result %d: model path %q, want %q", i, got.ModelPath, want.ModelPath)
			}
			if want.Err != nil {
				if got.Err == nil || got.Err.Error() != want.Err.Error() || inferr.TypeOf(got.Err) != inferr.TypeOf(want.Err) {
					t.Fatalf("result %d: error %v, want %v", i, got.Err, want.Err)
				}
				continue
			}
			if got.Err != nil || !reflect.DeepEqual(got.Tensors, want.Tensors) {
				t.Fatalf("result %d: got %+v, want %+v", i, got, want)
			}
		}
		if again := Render(back); !bytes.Equal(again, out) {
			t.Fatalf("rendering the parsed response differs:\n%s\n%s", out, again)
		}
	})
}

// checkSameAsSlowPath asserts that Parse (the in-place fast path with its
// per-entry fallback) returns exactly what the gjson ForEach path returns.
func checkSameAsSlowPath(t *testing.T, data []byte, lim Limits, entries []Entry, err error) {
	t.Helper()
	slow := newRequestParser(lim.WithDefaults())
	want, wantErr := slow.requestSlow(data)
	if errString(err) != errString(wantErr) || inferr.TypeOf(err) != inferr.TypeOf(wantErr) {
		t.Fatalf("Parse error %v, gjson path error %v", err, wantErr)
	}
	if len(entries) != len(want) || (entries == nil) != (want == nil) {
		t.Fatalf("Parse returned %d entries, the gjson path %d", len(entries), len(want))
	}
	for i := range want {
		g, w := entries[i], want[i]
		if g.ModelPath != w.ModelPath || !reflect.DeepEqual(g.Tensors, w.Tensors) || errString(g.Err) != errString(w.Err) {
			t.Fatalf("entry %d: Parse %+v, gjson path %+v", i, g, w)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
