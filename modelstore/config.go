package modelstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/inferbid/inferbid/inferr"
)

// MaxConfigBytes bounds the config object the watcher reads.
const MaxConfigBytes = 64 << 20

// ModelEntry is one entry of the model_metadata config.
type ModelEntry struct {
	// Path is the model's key in the bucket: ending in "/" it selects every
	// object under that prefix, otherwise exactly one object. It is also the
	// path the model is registered and served under.
	Path string
	// Checksum is the expected model checksum (lowercase hex), or "" to
	// skip verification, as the seed allows.
	Checksum string
	// WarmUpJSON is a batch request run at registration; "" = none.
	WarmUpJSON string
	// EvictionGrace is how long the model keeps serving after it is
	// delisted or its checksum changes.
	EvictionGrace time.Duration
}

// IsDir reports whether the entry selects a directory (a key prefix).
func (e ModelEntry) IsDir() bool { return strings.HasSuffix(e.Path, "/") }

// Config is a parsed model_metadata config.
type Config struct {
	Models []ModelEntry
}

// ParseConfig parses the model config JSON strictly, the way the seed's
// protobuf JSON parser does: field names in snake_case or lowerCamelCase,
// null meaning absent, the grace period as a number or a decimal string,
// trailing commas tolerated (the seed's own examples have them). Unknown
// fields, wrong types, a missing or duplicate model_path, a malformed
// checksum, a negative or out-of-range grace period, or a warm-up request
// that is not JSON are INPUT_PARSING errors naming the entry and the field.
// The whole config is rejected on any error, so a typo never evicts models.
func ParseConfig(data []byte) (Config, error) {
	if len(data) > MaxConfigBytes {
		return Config{}, configErr("config is %d bytes, more than the %d-byte limit", len(data), MaxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(stripTrailingCommas(data)))
	dec.UseNumber()
	p := &configParser{dec: dec}
	cfg, err := p.parse()
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func configErr(format string, args ...any) error {
	return inferr.Errorf(inferr.InputParsing, "model config: "+format, args...)
}

type configParser struct {
	dec *json.Decoder
}

func (p *configParser) token() (json.Token, error) {
	t, err := p.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, configErr("unexpected end of JSON")
		}
		return nil, configErr("invalid JSON at byte %d: %v", p.dec.InputOffset(), err)
	}
	return t, nil
}

func (p *configParser) parse() (Config, error) {
	t, err := p.token()
	if err != nil {
		return Config{}, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return Config{}, configErr("want a JSON object with a \"model_metadata\" array, got %s", describeToken(t))
	}
	var cfg Config
	seen := false
	for p.dec.More() {
		kt, err := p.token()
		if err != nil {
			return Config{}, err
		}
		key, _ := kt.(string)
		switch key {
		case "model_metadata", "modelMetadata":
			if seen {
				return Config{}, configErr("duplicate field %q", key)
			}
			seen = true
			if cfg.Models, err = p.parseEntries(); err != nil {
				return Config{}, err
			}
		default:
			return Config{}, configErr("unknown field %q (want \"model_metadata\")", key)
		}
	}
	if _, err := p.token(); err != nil { // the closing '}'
		return Config{}, err
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, configErr("trailing data after the config object at byte %d", p.dec.InputOffset())
	}
	byPath := make(map[string]int, len(cfg.Models))
	for i, m := range cfg.Models {
		if j, dup := byPath[m.Path]; dup {
			return Config{}, configErr("model_metadata[%d]: model_path %q is also model_metadata[%d]", i, m.Path, j)
		}
		byPath[m.Path] = i
	}
	return cfg, nil
}

func (p *configParser) parseEntries() ([]ModelEntry, error) {
	t, err := p.token()
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return nil, configErr("model_metadata: want an array, got %s", describeToken(t))
	}
	var entries []ModelEntry
	for i := 0; p.dec.More(); i++ {
		e, err := p.parseEntry(i)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if _, err := p.token(); err != nil { // ']'
		return nil, err
	}
	return entries, nil
}

func (p *configParser) parseEntry(i int) (ModelEntry, error) {
	var e ModelEntry
	t, err := p.token()
	if err != nil {
		return e, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return e, configErr("model_metadata[%d]: want an object, got %s", i, describeToken(t))
	}
	where := func() string {
		if e.Path != "" {
			return fmt.Sprintf("model_metadata[%d] (%q)", i, e.Path)
		}
		return fmt.Sprintf("model_metadata[%d]", i)
	}
	seen := map[string]bool{}
	for p.dec.More() {
		kt, err := p.token()
		if err != nil {
			return e, err
		}
		key, _ := kt.(string)
		field := canonicalField(key)
		if field == "" {
			return e, configErr("%s: unknown field %q", where(), key)
		}
		if seen[field] {
			return e, configErr("%s: duplicate field %q", where(), field)
		}
		seen[field] = true
		vt, err := p.token()
		if err != nil {
			return e, err
		}
		if vt == nil { // null: absent, as in protobuf JSON
			continue
		}
		if d, ok := vt.(json.Delim); ok && (d == '{' || d == '[') {
			return e, configErr("%s: %s: want a %s, got %s", where(), field, fieldKind(field), describeToken(vt))
		}
		switch field {
		case "model_path", "checksum", "warm_up_batch_request_json":
			s, ok := vt.(string)
			if !ok {
				return e, configErr("%s: %s: want a string, got %s", where(), field, describeToken(vt))
			}
			switch field {
			case "model_path":
				e.Path = s
			case "checksum":
				e.Checksum = s
			default:
				e.WarmUpJSON = s
			}
		case "eviction_grace_period_in_ms":
			ms, err := parseGraceMillis(vt)
			if err != nil {
				return e, configErr("%s: eviction_grace_period_in_ms: %v", where(), err)
			}
			e.EvictionGrace = time.Duration(ms) * time.Millisecond
		}
	}
	if _, err := p.token(); err != nil { // '}'
		return e, err
	}
	if e.Path == "" {
		return e, configErr("%s: model_path is missing or empty", where())
	}
	if e.Checksum != "" {
		if !isHexSHA256(e.Checksum) {
			return e, configErr("%s: checksum: want 64 hex digits (SHA-256), got %q", where(), truncate(e.Checksum, 80))
		}
		e.Checksum = strings.ToLower(e.Checksum)
	}
	if e.WarmUpJSON != "" && !json.Valid([]byte(e.WarmUpJSON)) {
		return e, configErr("%s: warm_up_batch_request_json is not valid JSON", where())
	}
	return e, nil
}

// canonicalField maps the snake_case and lowerCamelCase names protobuf JSON
// accepts to the snake_case name; "" for unknown fields.
func canonicalField(key string) string {
	switch key {
	case "model_path", "modelPath":
		return "model_path"
	case "checksum":
		return "checksum"
	case "warm_up_batch_request_json", "warmUpBatchRequestJson":
		return "warm_up_batch_request_json"
	case "eviction_grace_period_in_ms", "evictionGracePeriodInMs":
		return "eviction_grace_period_in_ms"
	}
	return ""
}

func fieldKind(field string) string {
	if field == "eviction_grace_period_in_ms" {
		return "number of milliseconds"
	}
	return "string"
}

// parseGraceMillis accepts an int32 as a JSON number or decimal string
// (the seed's field is an int32), rejecting negative and fractional values.
func parseGraceMillis(t json.Token) (int64, error) {
	var s string
	switch v := t.(type) {
	case json.Number:
		s = v.String()
	case string:
		s = strings.TrimSpace(v)
	default:
		return 0, fmt.Errorf("want a number of milliseconds, got %s", describeToken(t))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("want a whole number of milliseconds, got %q", truncate(s, 40))
		}
		if f < math.MinInt32 || f > math.MaxInt32 {
			return 0, fmt.Errorf("%s is out of range 0..%d", truncate(s, 40), math.MaxInt32)
		}
		n = int64(f)
	}
	if n < 0 {
		return 0, fmt.Errorf("must not be negative, got %d", n)
	}
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("%d is out of range 0..%d", n, math.MaxInt32)
	}
	return n, nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func describeToken(t json.Token) string {
	switch v := t.(type) {
	case nil:
		return "null"
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("the string %q", truncate(v, 40))
	case json.Number:
		return "the number " + truncate(v.String(), 40)
	case bool:
		return fmt.Sprintf("%t", v)
	}
	return fmt.Sprintf("%v", t)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// stripTrailingCommas removes a comma that is followed, after whitespace,
// by '}' or ']' outside strings. The seed's parser tolerates them and its
// documented configs use them; encoding/json does not. A comma that is the
// whole content between brackets ("[,]") is removed too and then "[]"
// parses: harmless.
func stripTrailingCommas(data []byte) []byte {
	var out []byte // allocated only when a trailing comma is found
	last := 0      // data[last:] is not yet copied to out
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			continue
		}
		if c != ',' {
			continue
		}
		j := i + 1
		for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
			j++
		}
		if j < len(data) && (data[j] == '}' || data[j] == ']') {
			if out == nil {
				out = make([]byte, 0, len(data))
			}
			out = append(out, data[last:i]...)
			last = i + 1
		}
	}
	if out == nil {
		return data
	}
	return append(out, data[last:]...)
}
