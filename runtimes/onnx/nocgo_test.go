//go:build !cgo

package onnx

import (
	"context"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
)

func TestNoCgoLoadExplains(t *testing.T) {
	rt, err := runtimes.Open(Name, driver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Load(context.Background(), "m/", driver.Files{"model.onnx": []byte("x")})
	if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), "CGO_ENABLED=1") {
		t.Fatalf("got %v (type %v), want MODEL_EXECUTION explaining the cgo rebuild", err, inferr.TypeOf(err))
	}
}
