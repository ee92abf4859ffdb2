package batch

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/tensor"
)

// entryJSON builds one request entry with a single tensor.
func entryJSON(path, name, dtype, shape, content string) string {
	return fmt.Sprintf(`{"model_path":%q,"tensors":[{"tensor_name":%q,"data_type":%q,"tensor_shape":%s,"tensor_content":%s}]}`,
		path, name, dtype, shape, content)
}

func requestJSON(entries ...string) []byte {
	return []byte(`{"request":[` + strings.Join(entries, ",") + `]}`)
}

func mustParse(t *testing.T, doc []byte) []Entry {
	t.Helper()
	es, err := Parse(doc, Limits{})
	checkSameAsSlowPath(t, doc, Limits{}, es, err)
	if err != nil {
		t.Fatalf("Parse(%s): %v", doc, err)
	}
	return es
}

// parseOne parses a batch of one entry and returns that entry.
func parseOne(t *testing.T, doc []byte) Entry {
	t.Helper()
	es := mustParse(t, doc)
	if len(es) != 1 {
		t.Fatalf("Parse(%s) returned %d entries, want 1", doc, len(es))
	}
	return es[0]
}

func TestParseDesignExample(t *testing.T) {
	// The request example of docs/architecture.md, verbatim.
	doc := []byte(`{"request":[{"model_path":"pcvr/v1/","tensors":[{"tensor_name":"x","data_type":"DOUBLE",
  "tensor_shape":[2,1],"tensor_content":["0.45","-0.25"]}]}]}`)
	e := parseOne(t, doc)
	want := Entry{ModelPath: "pcvr/v1/", Tensors: []tensor.Tensor{
		tensor.New("x", []int64{2, 1}, []float64{0.45, -0.25}),
	}}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("got %+v, want %+v", e, want)
	}
}

// TestParseRejectsV2OnlyDTypes: the batch JSON contract keeps its six
// dtypes; the ones only the v2 surfaces carry are an INPUT_PARSING error of
// the entry, as any unknown data_type is.
func TestParseRejectsV2OnlyDTypes(t *testing.T) {
	for _, d := range tensor.AllDTypes {
		if d.Contract() {
			continue
		}
		doc := `{"request":[{"model_path":"m/","tensors":[{"tensor_name":"x","data_type":"` + d.String() + `","tensor_shape":[1],"tensor_content":[1]}]}]}`
		entries, err := Parse([]byte(doc), Limits{})
		if err != nil {
			t.Fatalf("%s: whole batch failed: %v", d, err)
		}
		if len(entries) != 1 || inferr.TypeOf(entries[0].Err) != inferr.InputParsing ||
			!strings.Contains(entries[0].Err.Error(), `data_type "`+d.String()+`" is not one of DOUBLE, FLOAT, INT8, INT16, INT32, INT64`) {
			t.Errorf("%s: entries %+v, want the entry's INPUT_PARSING error naming the data_type", d, entries)
		}
	}
}

func TestParseEveryDType(t *testing.T) {
	doc := []byte(`{"request":[{"model_path":"all/","tensors":[
		{"tensor_name":"d","data_type":"DOUBLE","tensor_shape":[3],"tensor_content":["0.1", -2.5e-3, " 1e300 "]},
		{"tensor_name":"f","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":["3.14", 0.1, "-16777217"]},
		{"tensor_name":"i8","data_type":"INT8","tensor_shape":[2],"tensor_content":["-128", 127]},
		{"tensor_name":"i16","data_type":"INT16","tensor_shape":[2],"tensor_content":["-32768", 32767]},
		{"tensor_name":"i32","data_type":"INT32","tensor_shape":[2],"tensor_content":["-2147483648", 2147483647]},
		{"tensor_name":"i64","data_type":"INT64","tensor_shape":[2],"tensor_content":["-9223372036854775808", 9223372036854775807]}
	]}]}`)
	e := parseOne(t, doc)
	if e.Err != nil {
		t.Fatal(e.Err)
	}
	want := []tensor.Tensor{
		tensor.New("d", []int64{3}, []float64{0.1, -0.0025, 1e300}),
		tensor.New("f", []int64{1, 3}, []float32{3.14, 0.1, -16777216}),
		tensor.New("i8", []int64{2}, []int8{math.MinInt8, math.MaxInt8}),
		tensor.New("i16", []int64{2}, []int16{math.MinInt16, math.MaxInt16}),
		tensor.New("i32", []int64{2}, []int32{math.MinInt32, math.MaxInt32}),
		tensor.New("i64", []int64{2}, []int64{math.MinInt64, math.MaxInt64}),
	}
	if !reflect.DeepEqual(e.Tensors, want) {
		t.Fatalf("got  %v\nwant %v", e.Tensors, want)
	}
	for _, tn := range e.Tensors {
		if err := tn.Validate(0); err != nil {
			t.Errorf("parsed tensor does not validate: %v", err)
		}
	}
}

func TestParseInt64Precision(t *testing.T) {
	// 2^53+1 is the first integer float64 cannot hold: a parser that goes
	// through float64 returns 9007199254740992.
	for _, content := range []string{`["9007199254740993"]`, `[9007199254740993]`, `[" +9007199254740993 "]`} {
		e := parseOne(t, requestJSON(entryJSON("m", "x", "INT64", "[1]", content)))
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		got := e.Tensors[0].Data.([]int64)[0]
		if got != 1<<53+1 {
			t.Errorf("%s parsed as %d, want %d", content, got, int64(1<<53+1))
		}
	}
}

func TestParseNumbersAsStringsAndJSONNumbers(t *testing.T) {
	cases := []struct {
		dtype, value string
		want         any
	}{
		{"DOUBLE", `"0.45"`, 0.45},
		{"DOUBLE", `0.45`, 0.45},
		{"DOUBLE", `"\t-0.25\n"`, -0.25},
		{"DOUBLE", `"+.5"`, 0.5},
		{"DOUBLE", `"5."`, 5.0},
		{"DOUBLE", `"1E-7"`, 1e-7},
		{"DOUBLE", `1e-400`, 0.0}, // underflow rounds to zero, as absl::SimpleAtod does
		{"DOUBLE", `"0.30000000000000004"`, math.Nextafter(0.3, 1)},
		{"DOUBLE", `"\u0031.5"`, 1.5}, // JSON escapes inside a numeric string
		{"FLOAT", `"3.14"`, float32(3.14)},
		{"FLOAT", `3.4028234663852886e38`, float32(math.MaxFloat32)},
		// Just above the midpoint 1+2^-24 between two float32s: rounding through
		// float64 lands on the midpoint and then ties to even (1); rounding
		// directly to float32, as required, gives 1+2^-23.
		{"FLOAT", `"1.0000000596046448"`, float32(1 + 1.0/(1<<23))},
		{"FLOAT", `16777217`, float32(16777216)},   // an exact float32 midpoint: ties to even
		{"FLOAT", `"16777219"`, float32(16777220)}, // ties to even, upwards
		{"FLOAT", `"0.100000001"`, float32(0.1)},   // 9 digits: the via-float64 path
		{"FLOAT", `"1.00000006"`, float32(1 + 1.0/(1<<23))},
		{"INT8", `"-0"`, int8(0)},
		{"INT8", `"007"`, int8(7)},
		{"INT16", `-300`, int16(-300)},
		{"INT32", `" 42 "`, int32(42)},
		{"INT64", `-1`, int64(-1)},
	}
	for _, c := range cases {
		e := parseOne(t, requestJSON(entryJSON("m", "x", c.dtype, "[]", "["+c.value+"]")))
		if e.Err != nil {
			t.Errorf("%s %s: %v", c.dtype, c.value, e.Err)
			continue
		}
		got := reflect.ValueOf(e.Tensors[0].Data).Index(0).Interface()
		if got != c.want {
			t.Errorf("%s %s: got %v (%T), want %v (%T)", c.dtype, c.value, got, got, c.want, c.want)
		}
	}
}

func TestParseFloatsMatchStrconv(t *testing.T) {
	// The fast path must give exactly what strconv gives, for both widths.
	var vals []string
	for i := range 4000 {
		x := math.Float64frombits(uint64(i) * 0x9E3779B97F4A7C15) // scattered bit patterns
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		y := float64(float32(x)) * 1e-30 // many of these land in the exact fast path
		for _, prec := range []int{-1, 1, 3, 7, 9, 16, 17} {
			vals = append(vals, strconv.FormatFloat(x, 'g', prec, 64), strconv.FormatFloat(y, 'g', prec, 32))
			if math.Abs(x) < 1e25 {
				vals = append(vals, strconv.FormatFloat(x, 'f', prec, 64))
			}
		}
		vals = append(vals, strconv.Itoa(i), "0."+strconv.Itoa(i), strconv.Itoa(i)+"e-"+strconv.Itoa(i%30), "-"+strconv.Itoa(i)+".5e"+strconv.Itoa(i%25))
	}
	fast := 0
	for _, s := range vals {
		for _, bits := range []int{32, 64} {
			if _, ok := fastFloat(s, bits); ok {
				fast++
			}
			want, werr := strconv.ParseFloat(s, bits)
			got, problem := parseFloat(s, kindString, bits)
			if werr != nil || math.IsInf(want, 0) {
				if problem == "" {
					t.Errorf("ParseFloat(%q, %d) fails (%v) but parseFloat accepts %v", s, bits, werr, got)
				}
				continue
			}
			if problem != "" || math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("parseFloat(%q, %d) = %v %q, strconv says %v", s, bits, got, problem, want)
			}
		}
	}
	if fast < len(vals)/4 {
		t.Errorf("only %d of %d values took the fast path: the comparison does not cover it", fast, 2*len(vals))
	}
}

func TestFastIntMatchesStrconv(t *testing.T) {
	for _, s := range []string{"0", "-0", "+0", "1", "-1", "127", "128", "-128", "-129", "32767", "32768", "-32769",
		"2147483647", "2147483648", "-2147483648", "-2147483649", "999999999999999999", "-999999999999999999", "+12", "-", "+", ""} {
		for _, bits := range []int{8, 16, 32, 64} {
			want, werr := strconv.ParseInt(s, 10, bits)
			got, ok := fastInt(s, bits)
			if ok && (werr != nil || got != want) {
				t.Errorf("fastInt(%q, %d) = %d, strconv says %d, %v", s, bits, got, want, werr)
			}
		}
	}
}

// checkDescription asserts err is a typed INPUT_PARSING error whose
// description contains every part.
func checkDescription(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want INPUT_PARSING mentioning %q", what, parts)
		return
	}
	if got := inferr.TypeOf(err); got != inferr.InputParsing {
		t.Errorf("%s: error type %v, want INPUT_PARSING (%v)", what, got, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: description %q does not mention %q", what, err.Error(), p)
		}
	}
}

func TestParseEntryErrors(t *testing.T) {
	type tc struct {
		name      string
		entry     string
		modelPath string   // the Entry.ModelPath expected
		parts     []string // what the description must name
	}
	one := func(dtype, shape, content string) string { return entryJSON("pcvr/", "x", dtype, shape, content) }
	where := []string{"request[1]", `model_path "pcvr/"`, "tensors[0]", `tensor_name "x"`}
	cases := []tc{
		{"entry not object", `[1,2]`, "", []string{"request[1]", "array"}},
		{"missing model_path", `{"tensors":[]}`, "", []string{"request[1]", "missing model_path"}},
		{"model_path number", `{"model_path":7,"tensors":[]}`, "", []string{"request[1]", "model_path", "number 7"}},
		{"model_path null", `{"model_path":null,"tensors":[]}`, "", []string{"model_path", "null"}},
		{"missing tensors", `{"model_path":"pcvr/"}`, "pcvr/", []string{"request[1]", `"pcvr/"`, "missing tensors"}},
		{"tensors object", `{"model_path":"pcvr/","tensors":{}}`, "pcvr/", []string{"tensors is an object"}},
		{"duplicate model_path", `{"model_path":"pcvr/","model_path":"other/","tensors":[]}`, "pcvr/", []string{`"model_path" appears more than once`}},
		{"tensor not object", `{"model_path":"pcvr/","tensors":["x"]}`, "pcvr/", []string{"tensors[0]", `"x"`, "want an object"}},
		{"tensor_name number", `{"model_path":"pcvr/","tensors":[{"tensor_name":1}]}`, "pcvr/", []string{"tensors[0]", "tensor_name", "number 1"}},
		{"missing data_type", `{"model_path":"pcvr/","tensors":[{"tensor_name":"x","tensor_shape":[1],"tensor_content":[1]}]}`, "pcvr/", append(where, "missing data_type")},
		{"bad data_type", one("FLOAT32", "[1]", "[1]"), "pcvr/", append(where, "data_type", `"FLOAT32"`)},
		{"lowercase data_type", one("float", "[1]", "[1]"), "pcvr/", append(where, "data_type", `"float"`)},
		{"data_type number", one("", "[1]", "[1]")[:0] + `{"model_path":"pcvr/","tensors":[{"tensor_name":"x","data_type":3,"tensor_shape":[1],"tensor_content":[1]}]}`, "pcvr/", append(where, "data_type", "number 3")},
		{"missing shape", `{"model_path":"pcvr/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_content":[1]}]}`, "pcvr/", append(where, "missing tensor_shape")},
		{"shape string", one("FLOAT", `"[1]"`, "[1]"), "pcvr/", append(where, "tensor_shape", `"[1]"`)},
		{"shape float", one("FLOAT", "[1.5]", "[1]"), "pcvr/", append(where, "tensor_shape[0]", "1.5")},
		{"shape exponent", one("FLOAT", "[1e2]", "[1]"), "pcvr/", append(where, "tensor_shape[0]", "1e2")},
		{"shape negative", one("FLOAT", "[2,-1]", "[1]"), "pcvr/", append(where, "tensor_shape[1]", "-1")},
		{"shape zero", one("FLOAT", "[0]", "[]"), "pcvr/", append(where, "tensor_shape[0]", "is 0")},
		{"shape quoted dim", one("FLOAT", `["2"]`, "[1,2]"), "pcvr/", append(where, "tensor_shape[0]", `"2"`)},
		{"shape overflow int64", one("FLOAT", "[9223372036854775808]", "[1]"), "pcvr/", append(where, "tensor_shape[0]", "9223372036854775808", "out of range")},
		{"shape rank", one("FLOAT", "["+strings.Repeat("1,", MaxRank)+"1]", "[1]"), "pcvr/", append(where, "tensor_shape", "more than 64 dimensions")},
		{"missing content", `{"model_path":"pcvr/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1]}]}`, "pcvr/", append(where, "missing tensor_content")},
		{"content not array", one("FLOAT", "[1]", `"1"`), "pcvr/", append(where, "tensor_content", `"1"`)},
		{"too few values", one("FLOAT", "[2,2]", "[1,2,3]"), "pcvr/", append(where, "tensor_shape [2,2] needs 4 values", "tensor_content has 3")},
		{"too many values", one("FLOAT", "[2]", "[1,2,3]"), "pcvr/", append(where, "needs 2 values", "has 3")},
		{"scalar with two values", one("INT32", "[]", "[1,2]"), "pcvr/", append(where, "needs 1 values", "has 2")},
		{"empty content", one("INT32", "[1]", "[]"), "pcvr/", append(where, "needs 1 values", "has 0")},
		{"fraction for int", one("INT32", "[2]", `["1","7.5"]`), "pcvr/", append(where, "tensor_content[1]", `"7.5"`, "not an integer", "INT32")},
		{"fraction number for int", one("INT64", "[1]", `[7.5]`), "pcvr/", append(where, "tensor_content[0]", "7.5", "not an integer")},
		{"exponent for int", one("INT64", "[1]", `[1e3]`), "pcvr/", append(where, "tensor_content[0]", "1e3")},
		{"int8 overflow", one("INT8", "[1]", `["128"]`), "pcvr/", append(where, `"128"`, "out of range for INT8")},
		{"int8 underflow", one("INT8", "[1]", `[-129]`), "pcvr/", append(where, "-129", "out of range for INT8")},
		{"int16 overflow", one("INT16", "[1]", `[32768]`), "pcvr/", append(where, "32768", "out of range for INT16")},
		{"int32 overflow", one("INT32", "[1]", `["2147483648"]`), "pcvr/", append(where, "2147483648", "out of range for INT32")},
		{"int64 overflow", one("INT64", "[1]", `[9223372036854775808]`), "pcvr/", append(where, "9223372036854775808", "out of range for INT64")},
		{"word", one("DOUBLE", "[1]", `["abc"]`), "pcvr/", append(where, "tensor_content[0]", `"abc"`, "not a valid DOUBLE")},
		{"empty string", one("DOUBLE", "[1]", `[""]`), "pcvr/", append(where, "tensor_content[0]", `""`)},
		{"nan", one("DOUBLE", "[1]", `["nan"]`), "pcvr/", append(where, `"nan"`, "NaN and Inf are not accepted")},
		{"inf", one("FLOAT", "[1]", `["-Infinity"]`), "pcvr/", append(where, `"-Infinity"`, "NaN and Inf")},
		{"float32 overflow", one("FLOAT", "[1]", `["1e39"]`), "pcvr/", append(where, `"1e39"`, "out of range for FLOAT")},
		{"float64 overflow", one("DOUBLE", "[1]", `[1e309]`), "pcvr/", append(where, "1e309", "out of range for DOUBLE")},
		{"hex float", one("DOUBLE", "[1]", `["0x1p-2"]`), "pcvr/", append(where, `"0x1p-2"`)},
		{"underscore", one("DOUBLE", "[1]", `["1_000"]`), "pcvr/", append(where, `"1_000"`)},
		{"hex int", one("INT32", "[1]", `["0x10"]`), "pcvr/", append(where, `"0x10"`)},
		{"bool value", one("INT32", "[2]", `[1,true]`), "pcvr/", append(where, "tensor_content[1]", "boolean true")},
		{"null value", one("FLOAT", "[1]", `[null]`), "pcvr/", append(where, "tensor_content[0]", "null")},
		{"nested value", one("FLOAT", "[2]", `[[1],[2]]`), "pcvr/", append(where, "tensor_content[0]", "array")},
		{"long value clipped", one("DOUBLE", "[1]", `["`+strings.Repeat("9", 5000)+`x"]`), "pcvr/", append(where, "(5001 bytes)")},
		{"duplicate tensor field", `{"model_path":"pcvr/","tensors":[{"tensor_name":"x","data_type":"FLOAT","data_type":"INT8","tensor_shape":[1],"tensor_content":[1]}]}`, "pcvr/", append(where, `"data_type" appears more than once`)},
		{"too many tensors", `{"model_path":"pcvr/","tensors":[` + strings.Repeat(`{"data_type":"INT8","tensor_shape":[],"tensor_content":[1]},`, 3) + `{}]}`, "pcvr/", []string{"request[1]", "tensors[3]", "more than 3 tensors"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			good := entryJSON("ok/", "x", "INT8", "[1]", "[1]")
			doc := requestJSON(good, c.entry, good)
			es, err := Parse(doc, Limits{MaxTensors: 3})
			checkSameAsSlowPath(t, doc, Limits{MaxTensors: 3}, es, err)
			if err != nil {
				t.Fatalf("whole-batch error %v, want a per-entry error", err)
			}
			if len(es) != 3 {
				t.Fatalf("%d entries, want 3", len(es))
			}
			for _, i := range []int{0, 2} {
				if es[i].Err != nil || es[i].ModelPath != "ok/" || len(es[i].Tensors) != 1 {
					t.Errorf("good entry %d was affected: %+v", i, es[i])
				}
			}
			bad := es[1]
			if bad.ModelPath != c.modelPath {
				t.Errorf("ModelPath %q, want %q", bad.ModelPath, c.modelPath)
			}
			if bad.Tensors != nil {
				t.Errorf("a failed entry has tensors %v", bad.Tensors)
			}
			checkDescription(t, c.name, bad.Err, c.parts...)
		})
	}
}

func TestParseBatchErrors(t *testing.T) {
	cases := []struct {
		name  string
		doc   string
		parts []string
	}{
		{"empty", ``, []string{"not valid JSON"}},
		{"not JSON", `{"request":[}`, []string{"not valid JSON"}},
		{"trailing garbage", `{"request":[]} x`, []string{"not valid JSON"}},
		{"single quotes", `{'request':[]}`, []string{"not valid JSON"}},
		{"NaN literal", `{"request":[{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":[NaN]}]}]}`, []string{"not valid JSON"}},
		{"BOM", "\xef\xbb\xbf{\"request\":[]}", []string{"not valid JSON"}},
		{"top-level array", `[{"request":[]}]`, []string{"an array", `"request"`}},
		{"top-level string", `"request"`, []string{"the string", `"request"`}},
		{"null", `null`, []string{"null"}},
		{"no request", `{"requests":[]}`, []string{`no "request" field`}},
		{"request object", `{"request":{"model_path":"m"}}`, []string{`"request" is an object`}},
		{"request null", `{"request":null}`, []string{`"request" is null`}},
		{"duplicate request", `{"request":[],"request":[]}`, []string{`"request" more than once`}},
		{"too many entries", string(requestJSON("1", "2", "3", "4", "5")), []string{"more than 4 entries"}},
		{"deep nesting", `{"request":[],"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`, []string{"deeper than 256"}},
		{"deep unclosed", strings.Repeat("[", 1<<20), []string{"deeper than 256"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			es, err := Parse([]byte(c.doc), Limits{MaxEntries: 4})
			checkSameAsSlowPath(t, []byte(c.doc), Limits{MaxEntries: 4}, es, err)
			if es != nil {
				t.Errorf("entries %v returned with a whole-batch error", es)
			}
			checkDescription(t, c.name, err, c.parts...)
		})
	}
}

func TestParseAcceptsOddButValidJSON(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []Entry
	}{
		{"empty batch", `{"request":[]}`, []Entry{}},
		{"whitespace everywhere", " \n\t{ \"request\" :\r\n [ { \"model_path\" : \"m\" , \"tensors\" : [ { \"data_type\" : \"INT8\" , \"tensor_shape\" : [ 2 ] , \"tensor_content\" : [ 1 , \"2\" ] } ] } ] } \n",
			[]Entry{{ModelPath: "m", Tensors: []tensor.Tensor{tensor.New("", []int64{2}, []int8{1, 2})}}}},
		{"escaped keys", `{"req\u0075est":[{"model\u005fpath":"m\/a","tensors":[{"tensor\u005fname":"\u0078","data_type":"INT8","tensor_shape":[],"tensor_content":[3]}]}]}`,
			[]Entry{{ModelPath: "m/a", Tensors: []tensor.Tensor{tensor.New("x", []int64{}, []int8{3})}}}},
		{"unicode names", `{"request":[{"model_path":"模型/v1/","tensors":[{"tensor_name":"entrée😀","data_type":"DOUBLE","tensor_shape":[1],"tensor_content":[1]}]}]}`,
			[]Entry{{ModelPath: "模型/v1/", Tensors: []tensor.Tensor{tensor.New("entrée😀", []int64{1}, []float64{1})}}}},
		{"surrogate pair escape", `{"request":[{"model_path":"\ud83d\ude00","tensors":[]}]}`,
			[]Entry{{ModelPath: "😀", Tensors: []tensor.Tensor{}}}},
		{"unknown fields ignored, deep but bounded", `{"meta":{"a":[[[[{"b":null}]]]]},"request":[{"extra":[1,{"c":true}],"model_path":"m","tensors":[{"data_type":"INT16","tensor_shape":[1],"unit":"x","tensor_content":[5]}]}]}`,
			[]Entry{{ModelPath: "m", Tensors: []tensor.Tensor{tensor.New("", []int64{1}, []int16{5})}}}},
		{"fields in any order", `{"request":[{"tensors":[{"tensor_content":["1.5"],"tensor_shape":[1],"data_type":"FLOAT","tensor_name":"n"}],"model_path":"m"}]}`,
			[]Entry{{ModelPath: "m", Tensors: []tensor.Tensor{tensor.New("n", []int64{1}, []float32{1.5})}}}},
		{"nesting just under the cap", `{"request":[],"x":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`, []Entry{}},
		{"brackets inside strings do not count as nesting", `{"request":[{"model_path":"` + strings.Repeat(`[{\"`, 400) + `","tensors":[]}]}`,
			[]Entry{{ModelPath: strings.Repeat(`[{"`, 400), Tensors: []tensor.Tensor{}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			es := mustParse(t, []byte(c.doc))
			if !reflect.DeepEqual(es, c.want) {
				t.Fatalf("got  %#v\nwant %#v", es, c.want)
			}
		})
	}
}

func TestParseInvalidUTF8ModelPath(t *testing.T) {
	e := parseOne(t, []byte("{\"request\":[{\"model_path\":\"m\xff/\",\"tensors\":[]}]}"))
	checkDescription(t, "invalid UTF-8", e.Err, "model_path", "UTF-8")
	if e.ModelPath != "m\uFFFD/" {
		t.Errorf("ModelPath %q, want the path with U+FFFD", e.ModelPath)
	}
}

func TestParseDoesNotAliasInput(t *testing.T) {
	doc := requestJSON(entryJSON("model/", "input", "INT8", "[1]", "[1]"), entryJSON("model/", "input", "INT8", "[1]", "[2]"))
	es := mustParse(t, doc)
	for i := range doc {
		doc[i] = 'Z'
	}
	for _, e := range es {
		if e.ModelPath != "model/" || e.Tensors[0].Name != "input" {
			t.Fatalf("entry changed with the input buffer: %q %q", e.ModelPath, e.Tensors[0].Name)
		}
	}
	es[0].Tensors = append(es[0].Tensors, tensor.Tensor{Name: "appended"})
	es[0].Tensors[0].Shape = append(es[0].Tensors[0].Shape, 9)
	if es[1].Tensors[0].Name != "input" || !reflect.DeepEqual(es[1].Tensors[0].Shape, []int64{1}) {
		t.Fatalf("appending to one entry's slices changed the next entry: %+v", es[1])
	}
}

// allocatedDuring returns the bytes allocated while f runs.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHugeShapesRejectedWithoutAllocating(t *testing.T) {
	cases := []struct {
		name, shape, content string
		parts                []string
	}{
		{"1e18 squared", "[1000000000000000000,1000000000000000000]", "[1]", []string{"more than"}},
		{"2^31 cubed", "[2147483648,2147483648,2147483648]", "[1]", []string{"more than"}},
		{"int64 max times 2", "[9223372036854775807,2]", "[1]", []string{"more than"}},
		{"just over the cap", "[4097,4096]", "[1]", []string{"more than 16777216 elements"}},
		{"at the cap, one value", "[4096,4096]", "[1]", []string{"needs 16777216 values", "has 1"}},
		{"at the cap, claimed by a short array", "[16777216]", "[" + strings.Repeat("1,", 1000) + "1]", []string{"needs 16777216 values", "has 1001"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := requestJSON(entryJSON("m", "x", "INT64", c.shape, c.content))
			var e Entry
			n := allocatedDuring(func() { e = parseOne(t, doc) })
			checkDescription(t, c.name, e.Err, c.parts...)
			if n > 1<<20 {
				t.Errorf("Parse allocated %d bytes for a rejected %d-byte request", n, len(doc))
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	doc := requestJSON(entryJSON("m", "x", "FLOAT", "[2,3]", "[1,2,3,4,5,6]"))
	if e := parseOne(t, doc); e.Err != nil {
		t.Fatalf("6 elements under the default limit: %v", e.Err)
	}
	es, err := Parse(doc, Limits{MaxElements: 5})
	if err != nil {
		t.Fatal(err)
	}
	checkDescription(t, "MaxElements 5", es[0].Err, "more than 5 elements")
	if _, err := Parse(requestJSON(`{}`, `{}`), Limits{MaxEntries: 2}); err != nil {
		t.Errorf("2 entries with MaxEntries 2: %v", err)
	}
	_, err = Parse(requestJSON(`{}`, `{}`, `{}`), Limits{MaxEntries: 2})
	checkDescription(t, "MaxEntries 2", err, "more than 2 entries")
}

func TestParseErrorsAreInferrErrors(t *testing.T) {
	es := mustParse(t, requestJSON(`{}`))
	var ie *inferr.Error
	if !errors.As(es[0].Err, &ie) || ie.Type != inferr.InputParsing {
		t.Fatalf("per-entry error %T %v is not an *inferr.Error of INPUT_PARSING", es[0].Err, es[0].Err)
	}
}

func TestFastPathTakesWellFormedEntries(t *testing.T) {
	cases := []struct {
		entry string
		fast  bool
	}{
		{entryJSON("m/", "x", "FLOAT", "[2,1]", `["0.5", 1]`), true},
		{`{"model_path":"m","extra":{"a":[1]},"tensors":[{"data_type":"INT8","tensor_shape":[],"unit":"x","tensor_content":[1]}]}`, true},
		{`{"model_path":"m","tensors":[]}`, true},
		{`{"tensors":[],"model_path":"m"}`, false},                                                             // fields out of order
		{`{"model_path":"m","tensors":[{"tensor_content":[1],"data_type":"INT8","tensor_shape":[1]}]}`, false}, // content first
		{entryJSON("m/", "x", "FLOAT", "[2]", `["0.5"]`), false},                                               // an error
		{entryJSON("m/", "x", "FLOAT", "[2]", `["]", 1]`), false},                                              // ']' inside a string
	}
	for _, c := range cases {
		p := newRequestParser(Limits{}.WithDefaults())
		cur := cursor{s: c.entry}
		_, ok := p.entryFast(&cur, 0)
		if ok != c.fast {
			t.Errorf("entryFast(%s) = %v, want %v", c.entry, ok, c.fast)
		}
		if ok && cur.i != len(c.entry) {
			t.Errorf("entryFast(%s) stopped at %d of %d", c.entry, cur.i, len(c.entry))
		}
	}
}
