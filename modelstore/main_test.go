package modelstore

import (
	"fmt"
	"os"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/storetest"
)

var servers *storetest.Servers

// TestMain starts versitygw and fake-gcs-server from the installed binaries
// (scripts/test-servers.sh install), or uses the ones the environment names,
// so plain `go test` runs the S3 and GCS suites. Afterwards it removes the
// binaries tests built.
func TestMain(m *testing.M) {
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
