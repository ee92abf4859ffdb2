package codestore

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/modelstore/storetest"
)

var servers *storetest.Servers

// TestMain runs the test binary as a JS worker when a Host started it, and
// otherwise starts the S3 and GCS test servers as modelstore's tests do.
func TestMain(m *testing.M) {
	if jsworker.IsWorker(os.Getenv) {
		os.Exit(jsworker.ExitCode(jsworker.Main(context.Background(), os.Getenv, os.Stderr), os.Stderr))
	}
	var err error
	servers, err = storetest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test servers:", err)
		os.Exit(1)
	}
	code := m.Run()
	servers.Stop()
	testhelp.RemoveBinaries()
	os.Exit(code)
}
