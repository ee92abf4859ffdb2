package jsbridge

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
)

// checkWalk compares the object fast path with batch.Parse on the
// stringified object: when the walk accepts, Parse must accept with equal
// entries. It reports whether the walk accepted.
func checkWalk(t testing.TB, rt *goja.Runtime, v goja.Value, lim batch.Limits, budget int64) bool {
	t.Helper()
	obj, isObj := v.(*goja.Object)
	if !isObj {
		return false
	}
	var walked []batch.Entry
	var ok bool
	if walked, ok = walkBatch(rt, obj, lim, budget); !ok {
		return false
	}
	strfy, _ := goja.AssertFunction(rt.Get("JSON").ToObject(rt).Get("stringify"))
	js, err := strfy(goja.Undefined(), v)
	if err != nil {
		t.Fatalf("the walk accepted an object JSON.stringify rejects: %v", err)
	}
	parsed, err := batch.Parse([]byte(js.String()), lim)
	if err != nil {
		t.Fatalf("the walk accepted %s, batch.Parse rejects it: %v", js, err)
	}
	for i := range parsed {
		if parsed[i].Err != nil {
			t.Fatalf("the walk accepted %s, batch.Parse rejects entry %d: %v", js, i, parsed[i].Err)
		}
	}
	if !reflect.DeepEqual(walked, parsed) {
		t.Fatalf("for %s\nwalk:  %#v\nParse: %#v", js, walked, parsed)
	}
	return true
}

func TestWalkMatchesParse(t *testing.T) {
	rt := goja.New()
	accept := []string{
		`{request:[]}`,
		`{request:[{model_path:"m/",tensors:[]}]}`,
		`{request:[{model_path:"m/",tensors:[{tensor_name:"x",data_type:"FLOAT",tensor_shape:[2,1],tensor_content:[0.1,"0.45"]}]}]}`,
		`{request:[{model_path:"m/",tensors:[{data_type:"DOUBLE",tensor_shape:[],tensor_content:[1e-300]}]}]}`,
		`{request:[{model_path:"m/",tensors:[{tensor_name:undefined,data_type:"DOUBLE",tensor_shape:[3],tensor_content:[-0,"-1.5e3","7"]}]}]}`,
		`{request:[{model_path:"m",tensors:[
			{tensor_name:"a",data_type:"INT8",tensor_shape:[2],tensor_content:[-128,"127"]},
			{tensor_name:"b",data_type:"INT16",tensor_shape:[2],tensor_content:[-32768,"32767"]},
			{tensor_name:"c",data_type:"INT32",tensor_shape:[2],tensor_content:[-2147483648,"2147483647"]},
			{tensor_name:"d",data_type:"INT64",tensor_shape:[3],tensor_content:[-9007199254740992,"9223372036854775807","-9223372036854775808"]}]},
		  {model_path:"n",tensors:[{tensor_name:"x",data_type:"FLOAT",tensor_shape:[1,1,1],tensor_content:[3.4028234663852886e38]}]}]}`,
		// float32 double rounding: the decimal of the double, not the double.
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[4],tensor_content:[1.0000000596046448,0.30000001192092896,1/3,16777217]}]}]}`,
	}
	for _, src := range accept {
		v, err := rt.RunString("(" + src + ")")
		if err != nil {
			t.Fatal(err)
		}
		if !checkWalk(t, rt, v, batch.Limits{}, 1<<20) {
			t.Errorf("the walk did not take the fast path for %s", src)
		}
	}
	// Objects the walk must hand to batch.Parse (checkWalk fails the test if
	// the walk accepts one of these and Parse disagrees).
	reject := []string{
		`{}`, `[]`, `{request:{}}`, `{request:[1]}`, `{request:[{tensors:[]}]}`,
		`{request:[{model_path:1,tensors:[]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1],tensor_content:[NaN]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1],tensor_content:[Infinity]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1],tensor_content:[1e39]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1],tensor_content:[" 1"]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1],tensor_content:["0x10"]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"INT8",tensor_shape:[1],tensor_content:[128]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"INT8",tensor_shape:[1],tensor_content:[1.5]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"INT64",tensor_shape:[1],tensor_content:[9223372036854775808]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"INT64",tensor_shape:[1],tensor_content:["+1"]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[2],tensor_content:[1]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[0],tensor_content:[]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1.5],tensor_content:[1]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1],tensor_content:[new Number(1)]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1],tensor_content:[,]}]}]}`,
		`{request:[{model_path:"m",tensors:[{tensor_name:null,data_type:"FLOAT",tensor_shape:[1],tensor_content:[1]}]}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"float",tensor_shape:[1],tensor_content:[1]}]}]}`,
		`{request:[{model_path:"\ud800",tensors:[]}]}`,
		`{request:[{model_path:"m",tensors:[]}], toJSON: function(){ return {request:[]}; }}`,
		`Object.create({request:[]})`,
		`{request:[], other: 1}`,
		`{request:[{model_path:"m",tensors:[], extra: 1n}]}`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[1],tensor_content:[1],x:1}]}]}`,
		`(function(){ var o = {request:[]}; o.self = o; return o; })()`,
		`{get request() { throw new Error("boom"); }}`,
		`(function(){ var o = {}; Object.defineProperty(o, "request", {value: [], enumerable: false}); return o; })()`,
		`{request:[{model_path:"m",tensors:[{data_type:"FLOAT",tensor_shape:[100000],tensor_content:new Array(100000).fill(1)}]}]}`,
	}
	for _, src := range reject {
		v, err := rt.RunString("(" + src + ")")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if checkWalk(t, rt, v, batch.Limits{MaxElements: 1000}, 1<<20) {
			t.Errorf("the walk took the fast path for %s; it should defer to batch.Parse", src)
		}
	}
}

// FuzzWalkMatchesParse: for any JSON the JS side can parse into an object,
// the walk either defers to batch.Parse or gives exactly Parse's entries.
func FuzzWalkMatchesParse(f *testing.F) {
	for _, s := range []string{
		`{"request":[{"model_path":"m/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[2,1],"tensor_content":[0.1,"0.45"]}]}]}`,
		`{"request":[{"model_path":"m","tensors":[{"data_type":"INT64","tensor_shape":[2],"tensor_content":["-9223372036854775808",4611686018427387904]}]}]}`,
		`{"request":[{"model_path":"m","tensors":[{"data_type":"INT16","tensor_shape":[1],"tensor_content":["007"]}]}]}`,
		`{"request":[{"model_path":"m","tensors":[{"data_type":"DOUBLE","tensor_shape":[1],"tensor_content":["1e308"]}]}]}`,
		`{"request":[]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		rt := goja.New()
		parse, _ := goja.AssertFunction(rt.Get("JSON").ToObject(rt).Get("parse"))
		v, err := parse(goja.Undefined(), rt.ToValue(data))
		if err != nil {
			return
		}
		checkWalk(t, rt, v, batch.Limits{MaxElements: 4096, MaxEntries: 64, MaxTensors: 16}, 1<<16)
	})
}

// TestToFloat32 checks the fast rounding against the decimal round trip it
// stands for, on random doubles and on doubles next to float32 midpoints.
func TestToFloat32(t *testing.T) {
	slow := func(f float64) float32 {
		r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 64), 32)
		return float32(r)
	}
	check := func(f float64) {
		got, ok := toFloat32(f)
		if want := slow(f); ok && got != want && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Fatalf("toFloat32(%v) = %v, want %v", f, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		check(math.Float64frombits(r.Uint64()))
		check(r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30)))
	}
	for range 4000 {
		g := math.Float32frombits(r.Uint32() &^ (1 << 31))
		if math.IsInf(float64(g), 0) || math.IsNaN(float64(g)) {
			continue
		}
		mid := (float64(g) + float64(math.Nextafter32(g, float32(math.Inf(1))))) / 2
		f := mid
		for range 8 {
			check(f)
			f = math.Nextafter(f, math.Inf(1))
		}
		f = mid
		for range 8 {
			check(f)
			f = math.Nextafter(f, math.Inf(-1))
		}
	}
}
