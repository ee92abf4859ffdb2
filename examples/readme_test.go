package examples_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/jsbridge"
)

// The documents whose code blocks TestReadmes runs, in order: README.md's
// make demo builds the binaries the later blocks use.
var readmes = []string{"README.md", "examples/README.md"}

// Markers are HTML comments that start the line before a fence (invisible
// once rendered):
//
//	<!-- readme-test: skip (why) -->  the block is not run (it runs for minutes or does not end)
//	<!-- readme-test: output -->      the block is what the last sh block run before it printed
const markerPrefix = "<!-- readme-test:"

// block is one fenced code block of a Markdown document.
type block struct {
	line   int    // of the opening fence, 1-based
	lang   string // the fence's info string
	body   string
	skip   string // the skip marker's reason
	output bool   // marked as the output of the sh block before it
}

var fence = regexp.MustCompile("^```([^`]*)$")

// parseBlocks returns the fenced code blocks of a Markdown document with
// their markers; a fence left open or a malformed marker is an error.
func parseBlocks(doc string) ([]block, error) {
	var blocks []block
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(strings.TrimRight(lines[i], " "))
		if m == nil {
			if strings.HasPrefix(lines[i], markerPrefix) && (i+1 >= len(lines) || !fence.MatchString(lines[i+1])) {
				return nil, fmt.Errorf("line %d: a readme-test marker must be on the line just before a fence", i+1)
			}
			continue
		}
		b := block{line: i + 1, lang: strings.TrimSpace(m[1])}
		if i > 0 && strings.HasPrefix(lines[i-1], markerPrefix) {
			marker := strings.TrimSpace(lines[i-1])
			arg, ok := strings.CutPrefix(marker, markerPrefix)
			arg, ok2 := strings.CutSuffix(arg, "-->")
			arg = strings.TrimSpace(arg)
			switch {
			case !ok || !ok2:
				return nil, fmt.Errorf("line %d: malformed marker %q", i, marker)
			case arg == "output":
				b.output = true
			case strings.HasPrefix(arg, "skip (") && strings.HasSuffix(arg, ")"):
				b.skip = strings.TrimSuffix(strings.TrimPrefix(arg, "skip ("), ")")
			default:
				return nil, fmt.Errorf("line %d: unknown marker %q (want \"skip (why)\" or \"output\")", i, marker)
			}
		}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimRight(lines[i], " ") == "```" {
				closed = true
				break
			}
			body = append(body, lines[i])
		}
		if !closed {
			return nil, fmt.Errorf("line %d: the fence is never closed", b.line)
		}
		b.body = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// TestReadmes runs the code blocks of README.md and examples/README.md on
// a clean copy of the repository, as a newcomer would: sh blocks in bash
// (-e, pipefail), in order, and after make demo the three commands it
// suggests; js blocks in goja against the example models, checking the
// values their comments state; json blocks must parse; an output block
// must match what the sh block before it printed.
func TestReadmes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo")
	}
	if _, err := exec.LookPath("make"); err != nil {
		testhelp.RequireNative(t, "make", err)
	}
	dir := cleanCopy(t)
	for _, doc := range readmes {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseBlocks(string(data))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var lastOut string // of the last sh block run
		lastRun := false
		for _, b := range blocks {
			name := fmt.Sprintf("%s:%d", doc, b.line)
			if b.skip != "" {
				t.Logf("%s: %s block not run: %s", name, b.lang, b.skip)
				continue
			}
			if b.output {
				if !lastRun {
					t.Errorf("%s: an output block must come after a sh block that runs", name)
					continue
				}
				if err := checkOutput(b, lastOut); err != nil {
					t.Errorf("%s: %v", name, err)
				}
				continue
			}
			switch b.lang {
			case "sh", "bash", "shell":
				out, err := runShell(t, dir, b.body)
				if err != nil {
					t.Fatalf("%s: %v\n--- block ---\n%s--- output ---\n%s", name, err, b.body, out)
				}
				lastOut, lastRun = out, true
				for _, cmd := range nextCommands(out) {
					if next, err := runShell(t, dir, cmd+"\n"); err != nil {
						t.Errorf("%s: the suggested next command %q: %v\n%s", name, cmd, err, next)
					}
				}
			case "js", "javascript":
				if err := runJS(t, b.body); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			case "json":
				if !json.Valid([]byte(b.body)) {
					var v any
					t.Errorf("%s: the json block does not parse: %v", name, json.Unmarshal([]byte(b.body), &v))
				}
			case "text":
				// A diagram or a sample: nothing to run.
			default:
				t.Errorf("%s: a fenced block with language %q; use sh, js, json or text (and a readme-test marker when it must not run)", name, b.lang)
			}
		}
	}
}

// cleanCopy copies the files git would put in a fresh clone (tracked
// files, plus untracked ones not ignored, so that work not yet committed
// is tested too) to a temporary directory.
func cleanCopy(t *testing.T) string {
	t.Helper()
	root := testhelp.ModuleRoot(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("git not found: %v", err)
	}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git work tree?)", err)
	}
	dir := filepath.Join(t.TempDir(), "inferbid")
	n := 0
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, filepath.FromSlash(name))
		st, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted, not yet staged
		}
		if err != nil {
			t.Fatal(err)
		}
		if !st.Mode().IsRegular() {
			continue // a submodule or a symlink: none in this repository's sources
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("git ls-files listed no file")
	}
	return dir
}

// blockTimeout guards against a block that hangs: make demo builds three
// binaries, minutes on a cold cache and a busy 2-core machine.
const blockTimeout = 8 * time.Minute

// runShell runs script with bash -e -o pipefail in dir, in its own process
// group, which is killed afterwards (a block that fails half-way may leave
// a server running). It returns stdout and stderr, interleaved.
func runShell(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	// A newcomer's shell: no settings of an outer make (make test runs
	// this test), no demo log.
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "DEMO_KEEP_LOG":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A file, not a pipe: a server the block left running would hold a
	// pipe open, and Wait would wait for it.
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %v: %w", blockTimeout, err)
	}
	data, rerr := os.ReadFile(out.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	return string(data), err
}

// nextCommands returns the commands make demo suggests: the indented lines
// after "== next, try:", without their comments.
func nextCommands(out string) []string {
	var cmds []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "== next, try:":
			in = true
		case in && strings.HasPrefix(line, "  "):
			cmd, _, _ := strings.Cut(line, "#")
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				cmds = append(cmds, cmd)
			}
		default:
			in = false
		}
	}
	return cmds
}

// checkOutput checks an output block against what the sh block before it
// printed: a json block must equal a JSON value printed (numbers within a
// relative 1e-6: float32 results may differ in the last bits on another
// CPU); a text block's lines must appear in order.
func checkOutput(b block, out string) error {
	switch b.lang {
	case "json":
		var want any
		if err := json.Unmarshal([]byte(b.body), &want); err != nil {
			return fmt.Errorf("the output block does not parse: %w", err)
		}
		lines := strings.SplitAfter(out, "\n")
		for i, line := range lines {
			if l := strings.TrimSpace(line); !strings.HasPrefix(l, "{") && !strings.HasPrefix(l, "[") {
				continue
			}
			var got any
			if json.NewDecoder(strings.NewReader(strings.Join(lines[i:], ""))).Decode(&got) == nil && jsonEqual(got, want) {
				return nil
			}
		}
		return fmt.Errorf("the sh block before did not print this JSON value; it printed:\n%s", out)
	case "text":
		rest := strings.Split(out, "\n")
		for _, want := range strings.Split(strings.TrimSpace(b.body), "\n") {
			want = strings.TrimSpace(want)
			found := false
			for len(rest) > 0 && !found {
				found = strings.TrimSpace(rest[0]) == want
				rest = rest[1:]
			}
			if !found {
				return fmt.Errorf("the sh block before did not print the line %q (in this order); it printed:\n%s", want, out)
			}
		}
		return nil
	default:
		return fmt.Errorf("an output block must be json or text, not %q", b.lang)
	}
}

func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if w, ok := bm[k]; !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], bs[i]) {
				return false
			}
		}
		return true
	case float64:
		bf, ok := b.(float64)
		return ok && math.Abs(a-bf) <= 1e-6*math.Max(1, math.Max(math.Abs(a), math.Abs(bf)))
	default:
		return a == b
	}
}

// stated matches a comment that states a variable's value: "// NAME is
// JSON", the JSON continuing on the following comment lines.
var stated = regexp.MustCompile(`^\s*// ([A-Za-z_$][\w$]*) is(?:\s+(.*))?$`)

// runJS runs a js block in goja, with getModelPaths and runInference
// served by a real sidecar holding the example bucket's models, and checks
// every value its comments state.
func runJS(t *testing.T, src string) error {
	t.Helper()
	want := map[string]string{}
	var names []string
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		m := stated.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		text := m[2]
		for !json.Valid([]byte(text)) && i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "//") {
			i++
			text = strings.TrimSpace(text + " " + strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), "//")))
		}
		if !json.Valid([]byte(text)) {
			return fmt.Errorf("the value stated for %s is not JSON: %s", m[1], text)
		}
		want[m[1]] = text
		names = append(names, m[1])
	}
	var ret strings.Builder
	for _, n := range names {
		fmt.Fprintf(&ret, "%q: %s, ", n, n)
	}
	module := "function readmeBlock() {\n" + src + "\nreturn {" + ret.String() + "};\n}\n"

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, _ := serveExampleModels(t, ctx)
	pool, err := jsbridge.New("readme.js", module, jsbridge.Options{Inference: client, Size: 1, Logger: quietLogger()})
	if err != nil {
		return fmt.Errorf("the js block does not compile: %w", err)
	}
	defer pool.Close()
	out, err := pool.CallJSON(ctx, "readmeBlock")
	if err != nil {
		return fmt.Errorf("the js block fails: %w", err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		return err
	}
	for _, n := range names {
		var w any
		json.Unmarshal([]byte(want[n]), &w)
		if !jsonEqual(got[n], w) {
			g, _ := json.Marshal(got[n])
			return fmt.Errorf("%s is %s, not %s as the comment says", n, g, want[n])
		}
	}
	return nil
}

// TestParseBlocks: fences, languages and markers, and the errors for a
// fence left open and a marker that is misplaced or unknown.
func TestParseBlocks(t *testing.T) {
	doc := "text\n```sh\necho a\n```\n<!-- readme-test: output -->\n```text\na\n```\n" +
		"<!-- readme-test: skip (runs forever) -->\n```sh\nsleep 1000\n```\n```\nplain\n```\n"
	blocks, err := parseBlocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 ||
		blocks[0].lang != "sh" || blocks[0].body != "echo a\n" || blocks[0].line != 2 ||
		blocks[1].lang != "text" || !blocks[1].output ||
		blocks[2].skip != "runs forever" || blocks[2].body != "sleep 1000\n" ||
		blocks[3].lang != "" {
		t.Fatalf("blocks: %+v", blocks)
	}
	for _, bad := range []string{
		"```sh\necho\n", // never closed
		"<!-- readme-test: output -->\n\n```json\n{}\n```\n",  // not just before the fence
		"<!-- readme-test: run twice -->\n```sh\necho\n```\n", // unknown
	} {
		if _, err := parseBlocks(bad); err == nil {
			t.Errorf("parseBlocks(%q) accepted it", bad)
		}
	}
}

// TestCheckOutput: JSON found among other output (pretty or compact,
// numbers within tolerance), text lines in order, and the failures.
func TestCheckOutput(t *testing.T) {
	out := "== GET\n{\"a\": 1}\n== POST\n{\n  \"x\": [1.0000000001, \"s\"]\n}\ndone\n"
	for _, c := range []struct {
		b  block
		ok bool
	}{
		{block{lang: "json", body: `{"x": [1, "s"]}`}, true},
		{block{lang: "json", body: `{"a": 1}`}, true},
		{block{lang: "json", body: `{"x": [1.01, "s"]}`}, false},
		{block{lang: "json", body: `{"x": [1, "s"], "y": 2}`}, false},
		{block{lang: "text", body: "== GET\ndone\n"}, true},
		{block{lang: "text", body: "done\n== GET\n"}, false},
		{block{lang: "sh", body: "x"}, false},
	} {
		if err := checkOutput(c.b, out); (err == nil) != c.ok {
			t.Errorf("checkOutput(%s %q): %v, want ok=%v", c.b.lang, c.b.body, err, c.ok)
		}
	}
}

func TestNextCommands(t *testing.T) {
	out := "bids\n== next, try:\n  a/run.sh    # comment\n  X=1 make demo\n\nlater\n  not this\n"
	if got := nextCommands(out); len(got) != 2 || got[0] != "a/run.sh" || got[1] != "X=1 make demo" {
		t.Fatalf("nextCommands = %q", got)
	}
}

// TestRunJSChecksStatedValues: a stated value that is wrong fails.
func TestRunJSChecksStatedValues(t *testing.T) {
	if err := runJS(t, "const n = 1 + 1;\n// n is 2\n"); err != nil {
		t.Fatalf("a true statement: %v", err)
	}
	if err := runJS(t, "const n = 1 + 1;\n// n is\n//   3\n"); err == nil || !strings.Contains(err.Error(), "n is 2, not 3") {
		t.Fatalf("a false statement: %v", err)
	}
	if err := runJS(t, "const n = ;\n"); err == nil {
		t.Fatal("a block that does not compile passed")
	}
}
