package batch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/tensor"
)

// benchRequest builds a batch of entries, each one FLOAT [rows,8] tensor,
// with values as quoted strings (the reference's format) or JSON numbers.
func benchRequest(entries, rows int, quoted bool) []byte {
	var b strings.Builder
	b.WriteString(`{"request":[`)
	for e := range entries {
		if e > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"model_path":"pcvr_v1/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[%d,8],"tensor_content":[`, rows)
		for i := range rows * 8 {
			if i > 0 {
				b.WriteByte(',')
			}
			v := strconv.FormatFloat(float64(float32((e*rows*8+i)%10)/10+0.0123), 'g', -1, 32)
			if quoted {
				b.WriteString(`"` + v + `"`)
			} else {
				b.WriteString(v)
			}
		}
		b.WriteString(`]}]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// benchResults builds results like an MLP's: one FLOAT [rows,1] output per
// entry, values in (0,1) that need the full 17 digits once widened.
func benchResults(entries, rows int) []Result {
	rs := make([]Result, entries)
	for e := range rs {
		out := make([]float32, rows)
		for i := range out {
			out[i] = float32(1) / float32(3+i+e)
		}
		rs[e] = Result{ModelPath: "pcvr_v1/", Tensors: []tensor.Tensor{tensor.New("PartitionedCall:0", []int64{int64(rows), 1}, out)}}
	}
	return rs
}

var benchShapes = []struct {
	name          string
	entries, rows int
}{
	{"1x[1,8]", 1, 1},
	{"1x[64,8]", 1, 64},
	{"32x[4,8]", 32, 4},
}

func BenchmarkParse(b *testing.B) {
	for _, s := range benchShapes {
		for _, quoted := range []bool{true, false} {
			doc := benchRequest(s.entries, s.rows, quoted)
			name := s.name + "/numbers"
			if quoted {
				name = s.name + "/strings"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(doc)))
				reportCPUTime(b, func() {
					es, err := Parse(doc, Limits{})
					if err != nil || len(es) != s.entries || es[0].Err != nil {
						b.Fatal(err, es[0].Err)
					}
				})
			})
		}
	}
}

func BenchmarkAppendResponse(b *testing.B) {
	for _, s := range benchShapes {
		rs := benchResults(s.entries, s.rows)
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			out, _ := AppendResponse(nil, rs)
			b.SetBytes(int64(len(out)))
			reportCPUTime(b, func() {
				var err error
				buf, err = AppendResponse(buf[:0], rs)
				if err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkRender is AppendResponse into a fresh buffer, as the sidecar
// answers each call.
func BenchmarkRender(b *testing.B) {
	for _, s := range benchShapes {
		rs := benchResults(s.entries, s.rows)
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			reportCPUTime(b, func() {
				_ = Render(rs)
			})
		})
	}
}

// BenchmarkParseGJSONPath is Parse's fallback, gjson's ForEach at every
// level, on the same requests: what the in-place fast path saves.
func BenchmarkParseGJSONPath(b *testing.B) {
	for _, s := range benchShapes {
		doc := benchRequest(s.entries, s.rows, true)
		b.Run(s.name+"/strings", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			reportCPUTime(b, func() {
				p := newRequestParser(Limits{}.WithDefaults())
				if _, err := p.requestSlow(doc); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkEncodingJSONBaseline decodes the same requests with
// encoding/json into a struct (values left as json.Number, so it does less
// than Parse): a yardstick for the Parse numbers.
func BenchmarkEncodingJSONBaseline(b *testing.B) {
	type tensor struct {
		TensorName    string        `json:"tensor_name"`
		DataType      string        `json:"data_type"`
		TensorShape   []int64       `json:"tensor_shape"`
		TensorContent []json.Number `json:"tensor_content"`
	}
	type request struct {
		Request []struct {
			ModelPath string   `json:"model_path"`
			Tensors   []tensor `json:"tensors"`
		} `json:"request"`
	}
	for _, s := range benchShapes {
		doc := benchRequest(s.entries, s.rows, true)
		b.Run(s.name+"/strings", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			reportCPUTime(b, func() {
				var r request
				if err := json.Unmarshal(doc, &r); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
