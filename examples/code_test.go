package examples_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// codeUploadOutput is what examples/code/upload.sh prints (README.md,
// "Bidding code from a bucket", shows it).
const codeUploadOutput = `== bid.js v1 serves
{"version":"v1","bid":1}
== upload v2 as bid.js, keep v1 as bid-v1.js
{"version":"v2","bid":2.5}
== a request pinned to bid-v1.js
{"version":"v1","bid":1}
== upload a broken bid.js: v2 keeps serving
{"version":"v2","bid":2.5}
== GET /v1/code
{"name":"bid-v1.js","state":"serving","size":367,"last_error":null}
{"name":"bid.js","state":"default","size":316,"last_error":"jsbridge: module: compile bid.js: SyntaxError: bid.js: Line 4:3 Unexpected token return (and 3 more errors)"}
== delete bid-v1.js: it is no longer offered
{"error":"jsworker: code version \"bid-v1.js\" is not served (serving: bid.js; default \"bid.js\")"}
`

// TestCodeUploadScript runs examples/code/upload.sh, the ad tech's upload
// flow, against a freshly built bidding-server.
func TestCodeUploadScript(t *testing.T) {
	for _, tool := range []string{"curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	bin := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	cmd := exec.Command("code/upload.sh")
	cmd.Env = append(os.Environ(), "BIDDING_SERVER="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("upload.sh: %v\n%s", err, out)
	}
	if got := string(out); got != codeUploadOutput {
		t.Errorf("upload.sh printed\n%s\nwant\n%s", got, codeUploadOutput)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), codeUploadOutput) {
		t.Error("README.md does not show upload.sh's output as it is")
	}
}
