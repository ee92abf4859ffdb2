package jsbridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

const awaitScript = `
function choose(kind) { return kinds[kind](); }
var kinds = {
  asyncValue: async function () { return {bid: 1}; },
  asyncThrow: async function () { throw new Error("no bid"); },
  asyncAwaits: async function () { var a = await 2; var b = await Promise.resolve(3); return {bid: a * b}; },
  chain: function () {
    return Promise.resolve(1).then(function (x) { return x + 1; }).then(function (x) { return Promise.resolve({bid: x + 1}); });
  },
  rejectString: function () { return Promise.reject("plain reason"); },
  thenable: function () { return {then: function (resolve) { resolve({bid: 5}); }}; },
  thenableLater: function () {
    return {then: function (resolve) { Promise.resolve().then(function () { resolve({bid: 6}); }); }};
  },
  thenableOfPromise: function () {
    return {then: function (resolve) { resolve(Promise.resolve({then: function (r) { r(7); }})); }};
  },
  thenableRejects: function () { return {then: function (resolve, reject) { reject(new TypeError("thenable says no")); }}; },
  thenableThrows: function () { return {then: function () { throw new Error("then threw"); }}; },
  thenableResolvesThenThrows: function () { return {then: function (resolve) { resolve(8); throw new Error("ignored"); }}; },
  thenGetterThrows: function () { return {get then() { throw new Error("getter threw"); }}; },
  notThenable: function () { return {then: 5, bid: 9}; },
  neverSettles: function () { return new Promise(function () {}); },
  thenableNeverCalls: function () { return {then: function () {}}; },
  asyncNeverSettles: async function () { await new Promise(function () {}); return 1; },
  asyncSpins: async function () { await 1; for (;;) {} },
  endlessAwait: async function () { for (;;) await 0; },
  thenGetterSpins: function () { return {get then() { for (;;) {} }}; },
  thenGetterRecurses: function () { return {get then() { function f() { return f() + 1; } return f(); }}; },
};
async function generateBid() { return new Promise(function () {}); }
async function infer(batch) {
  var out = JSON.parse(await runInference(batch));
  return {bid: out.response[0].tensors[0].tensor_content[0]};
}
`

// TestAwait: a promise or a thenable a function returns is awaited; a
// rejection is a ScriptError; a promise that cannot settle is
// ErrUnsettled; the deadline holds throughout.
func TestAwait(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "isolated", true: "shared"}[shared], func(t *testing.T) { testAwait(t, shared) })
	}
}

func testAwait(t *testing.T, shared bool) {
	p, err := New("await.js", awaitScript, Options{Size: 1, CallTimeout: 300 * time.Millisecond, ShareRuntimes: shared, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct{ kind, want string }{
		{"asyncValue", `{"bid":1}`},
		{"asyncAwaits", `{"bid":6}`},
		{"chain", `{"bid":3}`},
		{"thenable", `{"bid":5}`},
		{"thenableLater", `{"bid":6}`},
		{"thenableOfPromise", `7`},
		{"thenableResolvesThenThrows", `8`},
		{"notThenable", `{"then":5,"bid":9}`},
		{"asyncThrow", "threw: Uncaught (in promise) Error: no bid\n\tat "},
		{"rejectString", "threw: Uncaught (in promise) plain reason"},
		{"thenableRejects", "threw: Uncaught (in promise) TypeError: thenable says no"},
		{"thenableThrows", "threw: Uncaught (in promise) Error: then threw"},
		{"thenGetterThrows", "threw: Uncaught (in promise) Error: getter threw"},
		{"neverSettles", "unsettled"},
		{"thenableNeverCalls", "unsettled"},
		{"asyncNeverSettles", "unsettled"},
		{"asyncSpins", "deadline"},
		{"endlessAwait", "deadline"},
		{"thenGetterSpins", "deadline"},
		{"thenGetterRecurses", "threw: RangeError: Maximum call stack size exceeded"},
		{"asyncValue", `{"bid":1}`}, // the pool serves on
	} {
		start := time.Now()
		out, err := p.CallJSON(context.Background(), "choose", []byte(`"`+c.kind+`"`))
		var got string
		var se *ScriptError
		switch {
		case err == nil:
			got = string(out)
		case errors.As(err, &se):
			got = "threw: " + se.Message
		case errors.Is(err, ErrUnsettled):
			got = "unsettled"
		case errors.Is(err, ErrDeadline):
			got = "deadline"
		default:
			got = err.Error()
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q", c.kind, got, c.want)
		}
		if took := time.Since(start); took > onTime(300*time.Millisecond) {
			t.Errorf("%s: returned after %v", c.kind, took)
		}
	}
	_, err = p.CallJSON(context.Background(), "generateBid")
	if !errors.Is(err, ErrUnsettled) || !strings.Contains(err.Error(), "generateBid returned a promise that never settled") {
		t.Errorf("generateBid: %v, want ErrUnsettled naming it", err)
	}
	// Groups await too.
	res := p.CallJSONGroup(context.Background(), "choose", [][][]byte{{[]byte(`"asyncValue"`)}, {[]byte(`"neverSettles"`)}, {[]byte(`"chain"`)}}, GroupOptions{})
	if string(res[0].Out) != `{"bid":1}` || !errors.Is(res[1].Err, ErrUnsettled) || string(res[2].Out) != `{"bid":3}` {
		t.Errorf("group: %s %v, %v, %s %v", res[0].Out, res[0].Err, res[1].Err, res[2].Out, res[2].Err)
	}
}

// TestAwaitInference: an async generateBid that awaits runInference (a
// synchronous host function) gets the sidecar's answer.
func TestAwaitInference(t *testing.T) {
	client := startInProcessSidecar(t)
	register(t, client, "affine/", "affine 2 1")
	p, err := New("await.js", awaitScript, Options{Size: 1, Inference: client, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out, err := p.CallJSON(context.Background(), "infer", []byte(quoteJSON(batchJSON("affine/", "[1,1]", "[3]"))))
	if err != nil || string(out) != `{"bid":7}` {
		t.Errorf("infer: %s, %v; want {\"bid\":7}", out, err)
	}
}

// quoteJSON is s as a JSON string.
func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
