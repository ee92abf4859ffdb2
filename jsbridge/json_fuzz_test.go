package jsbridge

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// jsonSeedTexts returns the JSON texts of the committed FuzzNativeJSONParse
// corpus (the bench request and response, unicode, surrogates, duplicate
// keys, __proto__, deep nesting, big numbers ...).
func jsonSeedTexts(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/fuzz/FuzzNativeJSONParse/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no seed corpus in testdata/fuzz/FuzzNativeJSONParse")
	}
	var texts []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		header, arg, ok := strings.Cut(strings.TrimSpace(string(data)), "\n")
		if !ok || header != "go test fuzz v1" || !strings.HasPrefix(arg, "string(") || !strings.HasSuffix(arg, ")") {
			t.Fatalf("%s: not a one-string fuzz corpus file", f)
		}
		s, err := strconv.Unquote(arg[len("string(") : len(arg)-1])
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		texts = append(texts, s)
	}
	return texts
}

// FuzzNativeJSONParse: on any text the native JSON.parse gives what goja's
// gives (compared by canon: types, -0, key order, attributes, prototypes),
// or both throw a SyntaxError. Text nested deeper than the bound must be a
// SyntaxError (goja's parse is not run on it: it may crash the process).
func FuzzNativeJSONParse(f *testing.F) {
	for _, s := range parseEdgeCases {
		f.Add(s)
	}
	p := newJSONPair(f)
	f.Fuzz(func(t *testing.T, text string) { checkParseText(t, p, text) })
}

// checkParseText is checkParse on text, or for text nested deeper than the
// bound a check that the native parse throws a SyntaxError (goja's parse is
// not run: it may crash the process).
func checkParseText(t testing.TB, p jsonPair, text string) {
	t.Helper()
	if _, deep := tooDeep(text); deep {
		_, err := callJSON(p.native, "parse", p.native.ToValue(text))
		if errorName(p.native, err) != "SyntaxError" {
			t.Fatalf("too deep: %v, want a SyntaxError", err)
		}
		return
	}
	checkParse(t, p, stringArg(text))
}
