package sidecar_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// TestErrorsClipEchoedModelPath sends a 100 MB model_path through every
// RPC of a real sidecar, and a 100 MB tensor name: each error names the
// start and the length of what was sent, and is short and valid UTF-8,
// instead of echoing 100 MB back.
func TestErrorsClipEchoedModelPath(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 100 MB requests")
	}
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: sidecar.NewAffineRuntime(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const size = 100 << 20
	path := "m/" + strings.Repeat("\xffé", 1000) // invalid UTF-8 too
	path += strings.Repeat("p", size-len(path))
	const wantTail = "... (104857600 bytes)"
	check := func(what string, err error, want inferr.Type) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		if inferr.TypeOf(err) != want || len(msg) > 2*inferr.MaxEcho+200 || !utf8.ValidString(msg) || !strings.Contains(msg, wantTail) {
			t.Errorf("%s: got %v, %d bytes, valid UTF-8 %v: %.400q", what, inferr.TypeOf(err), len(msg), utf8.ValidString(msg), msg)
		}
	}

	// The typed path (fast lane).
	res, err := client.Predict(ctx, []batch.Entry{{ModelPath: strings.ToValidUTF8(path, "?"), Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})}}})
	if err != nil {
		t.Fatal(err)
	}
	check("typed predict", res[0].Err, inferr.ModelNotFound)

	// The JSON path: the parser rejects the invalid UTF-8 path, a valid
	// one is not registered; both descriptions are clipped.
	for _, p := range []string{path, strings.ToValidUTF8(path, "?")} {
		doc := `{"request":[{"model_path":"` + p + `","tensors":[]}]}`
		out, err := client.PredictJSON(ctx, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 4*inferr.MaxEcho+400 {
			t.Errorf("JSON predict answered %d bytes: %.300q", len(out), out)
		}
		results, err := batch.ParseResponse(out)
		if err != nil {
			t.Fatal(err)
		}
		if e := results[0].Err; e == nil || !utf8.ValidString(e.Error()) || len(e.Error()) > 2*inferr.MaxEcho+200 {
			t.Errorf("JSON predict: %.400q", e)
		}
	}

	// A 100 MB tensor name, to a registered model that has no such input.
	if err := client.RegisterModel(ctx, "a/", runtimes.Files{"affine": []byte("2 1")}, ""); err != nil {
		t.Fatal(err)
	}
	res, err = client.Predict(ctx, []batch.Entry{{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New(strings.ToValidUTF8(path, "?"), []int64{1, 3}, []float32{1, 2, 3})}}})
	if err != nil {
		t.Fatal(err)
	}
	check("typed predict with a 100 MB tensor name", res[0].Err, inferr.InputParsing)

	check("register", client.RegisterModel(ctx, strings.ToValidUTF8(path, "?"), runtimes.Files{"not-affine": []byte("x")}, ""), inferr.ModelExecution)
	check("delete", client.DeleteModel(ctx, strings.ToValidUTF8(path, "?")), inferr.ModelNotFound)
}
