package jsbridge

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/batch"
)

// TestModuleCannotBreakHostJSON: the host parses arguments and stringifies
// results with JSON functions captured before the module ran; a module
// that replaces JSON or its methods does not change them.
func TestModuleCannotBreakHostJSON(t *testing.T) {
	const module = `
var realParse = JSON.parse;
JSON.parse = function () { throw new Error("module parse"); };
JSON.stringify = function () { throw new Error("module stringify"); };
JSON = {parse: JSON.parse, stringify: JSON.stringify};
function echo(x) { return x; }
function same(x) { return typeof x === "object" && x.a[1].b === "c"; }
function logObject(x) { console.log(x); return 1; }
function inferWith(x) { return runInference({toJSON: function () { return x; }}); }
`
	var logged strings.Builder
	p, err := New("breaker.js", module, Options{Size: 1, Inference: echoInference{}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := WithConsole(context.Background(), func(_ slog.Level, line string) { logged.WriteString(line) })
	out, err := p.CallJSON(ctx, "echo", []byte(`{"a":[1,{"b":"c"}],"d":-0.5}`))
	if err != nil || string(out) != `{"a":[1,{"b":"c"}],"d":-0.5}` {
		t.Fatalf("echo: %s, %v", out, err)
	}
	if out, err = p.CallJSON(ctx, "same", []byte(`{"a":[1,{"b":"c"}]}`)); err != nil || string(out) != "true" {
		t.Fatalf("same: %s, %v", out, err)
	}
	if _, err = p.CallJSON(ctx, "logObject", []byte(`{"logged":[1,2]}`)); err != nil {
		t.Fatal(err)
	}
	if logged.String() != `{"logged":[1,2]}` {
		t.Errorf("console.log of an object: %s", logged.String())
	}
	// runInference(object): the walk refuses an object with toJSON, so
	// the host stringifies it.
	out, err = p.CallJSON(ctx, "inferWith", []byte(batchJSON("m/", "[1,2]", "[0.5,1.5]")))
	if err != nil || !strings.Contains(string(out), `\"model_path\":\"m/\"`) {
		t.Fatalf("inferWith: %s, %v", out, err)
	}
}

// echoInference answers each entry with its own tensors.
type echoInference struct{}

func (echoInference) Predict(_ context.Context, entries []batch.Entry) ([]batch.Result, error) {
	res := make([]batch.Result, len(entries))
	for i, e := range entries {
		res[i] = batch.Result(e)
	}
	return res, nil
}

func (echoInference) ModelPaths(context.Context) ([]string, error) { return []string{"m/"}, nil }
