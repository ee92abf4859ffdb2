package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// The example against a real TensorFlow sidecar holding the example
// bucket's pctr models, through kserve's gRPC service on TCP.
func TestExampleClient(t *testing.T) {
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Logger: slog.New(slog.DiscardHandler)}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range []string{"pctr/v1/", "pctr/v2/"} {
		files, err := modelfiles.ReadLocal("../bucket/" + p)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.RegisterModel(ctx, p, files, ""); err != nil {
			t.Fatal(err)
		}
	}
	srv := kserve.New(kserve.Options{})
	srv.SetBackend(client)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := srv.NewGRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)

	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"--addr", ln.Addr().String()}, nil, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"versions [v1 v2] platform tensorflow_savedmodel", "input  dense FP32 [-1 6]", "id example-1: model pctr version v2", "output pctr FP32 [2 1] ["} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}
