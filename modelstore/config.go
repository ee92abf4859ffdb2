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
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/varstore"
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
	// Sequences are the entry's stateful-model settings (stateful,
	// max_sequence_number, idle_sequence_cleanup,
	// low_latency_transformation); nil when it gives none. Registered with
	// the model, they replace the runtime config's for it.
	Sequences *runtimes.SequenceSettings
	// ExternalVariables are the entry's external_variables: checkpoint
	// variables (their keys, as inferctl variables lists them) served from
	// a store, redis-cluster://host:port[,host:port...], instead of memory
	// (the TensorFlow runtime; issue 32); "" when none. Registered with the
	// model, in its context (runtimes.WithLoadOptions).
	ExternalVariables ExternalVariables
}

// ExternalVariables is an entry's external_variables as canonical JSON
// (an object with sorted keys), so that entries stay comparable; "" means
// none.
type ExternalVariables string

// Map returns the variables and their stores (nil when none).
func (x ExternalVariables) Map() map[string]string {
	if x == "" {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(x), &m); err != nil {
		return nil // canonical: written by parseExternalVariables
	}
	return m
}

// IsDir reports whether the entry selects a directory (a key prefix).
func (e ModelEntry) IsDir() bool { return strings.HasSuffix(e.Path, "/") }

// Config is a parsed model_metadata config.
type Config struct {
	// Models are the valid entries, in config order.
	Models []ModelEntry
	// Invalid are the rejected entries, in config order. The watcher
	// leaves the model an invalid entry names as it was, and retires no
	// model while an invalid entry names none (it could be any of them).
	Invalid []EntryError
}

// EntryError is a rejected config entry.
type EntryError struct {
	// Index is the entry's position in model_metadata.
	Index int
	// Path is the model_path the entry names, "" when it names none (the
	// field is missing, empty or not a string, or the entry is not an
	// object).
	Path string
	// Err is an INPUT_PARSING error naming the entry and the field.
	Err error
}

func (e EntryError) Error() string { return e.Err.Error() }
func (e EntryError) Unwrap() error { return e.Err }

// maxEntryErrorsShown bounds the entry errors Config.Err spells out, so a
// config of a million bad entries does not make a message of a million
// lines.
const maxEntryErrorsShown = 20

// Err joins the rejected entries' errors (the first 20, then a count);
// nil when every entry is valid.
func (c Config) Err() error {
	if len(c.Invalid) == 0 {
		return nil
	}
	errs := make([]error, 0, min(len(c.Invalid), maxEntryErrorsShown)+1)
	for i, e := range c.Invalid {
		if i == maxEntryErrorsShown {
			errs = append(errs, configErr("%d more entries rejected", len(c.Invalid)-i))
			break
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// ParseConfig parses the model config JSON strictly, the way the seed's
// protobuf JSON parser does: field names in snake_case or lowerCamelCase,
// null meaning absent, the grace period as a number or a decimal string,
// trailing commas tolerated (the seed's own examples have them).
//
// A config that is not valid JSON, is too large, or whose top level is
// wrong (not an object, an unknown or duplicate field, model_metadata not
// an array, trailing data) is rejected whole: the error is INPUT_PARSING.
// An entry with an unknown field, a wrong type, a missing or duplicate
// model_path, a malformed checksum, a negative or out-of-range grace period
// or a warm-up request that is not JSON is rejected alone: it goes to
// Config.Invalid with an INPUT_PARSING error naming the entry and the field,
// and the valid entries beside it are in Config.Models. Every entry naming
// a model_path listed more than once is rejected.
//
// It takes at most DefaultMaxEntries entries (ParseConfigMax sets another
// cap).
func ParseConfig(data []byte) (Config, error) { return ParseConfigMax(data, 0) }

// DefaultMaxEntries caps a config's model_metadata entries: past it the
// whole config is rejected (nothing it says takes effect), so that a
// runaway config cannot make the watcher hold, download and track an
// unbounded number of models.
const DefaultMaxEntries = 10000

// ParseConfigMax is ParseConfig with a cap of maxEntries entries (0 =
// DefaultMaxEntries); a config with more is rejected with an
// INPUT_PARSING error naming the cap.
func ParseConfigMax(data []byte, maxEntries int) (Config, error) {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	if len(data) > MaxConfigBytes {
		return Config{}, configErr("config is %d bytes, more than the %d-byte limit", len(data), MaxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(stripTrailingCommas(data)))
	dec.UseNumber()
	p := &configParser{dec: dec, maxEntries: maxEntries}
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
	dec        *json.Decoder
	maxEntries int
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

// raw reads the next JSON value whole, checking its syntax.
func (p *configParser) raw() (json.RawMessage, error) {
	var v json.RawMessage
	if err := p.dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, configErr("unexpected end of JSON")
		}
		return nil, configErr("invalid JSON at byte %d: %v", p.dec.InputOffset(), err)
	}
	return v, nil
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
			if cfg, err = p.parseEntries(); err != nil {
				return Config{}, err
			}
		default:
			return Config{}, configErr("unknown field %q (want \"model_metadata\")", inferr.ClipN(key, 80))
		}
	}
	if _, err := p.token(); err != nil { // the closing '}'
		return Config{}, err
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, configErr("trailing data after the config object at byte %d", p.dec.InputOffset())
	}
	return cfg, nil
}

// parseEntries reads the model_metadata array. Each entry is read whole
// first, so a syntax error anywhere still rejects the config, while an
// entry that is valid JSON but not a valid entry is rejected alone. Every
// entry naming a model_path that another entry (valid or not) also names
// is rejected: which one was meant cannot be told.
func (p *configParser) parseEntries() (Config, error) {
	var cfg Config
	t, err := p.token()
	if err != nil {
		return cfg, err
	}
	if t == nil {
		return cfg, nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return cfg, configErr("model_metadata: want an array, got %s", describeToken(t))
	}
	type parsed struct {
		entry ModelEntry
		err   error
	}
	var entries []parsed
	byPath := map[string][]int{} // model_path -> indexes of the entries naming it
	for i := 0; p.dec.More(); i++ {
		if i == p.maxEntries {
			return Config{}, configErr("model_metadata has more than %d entries, the cap (--inference_model_max_entries): split the models over several servers or raise the cap", p.maxEntries)
		}
		raw, err := p.raw()
		if err != nil {
			return Config{}, err
		}
		e, err := parseEntry(i, raw)
		entries = append(entries, parsed{e, err})
		if e.Path != "" {
			byPath[e.Path] = append(byPath[e.Path], i)
		}
	}
	if _, err := p.token(); err != nil { // ']'
		return Config{}, err
	}
	for i, pe := range entries {
		if same := byPath[pe.entry.Path]; pe.err == nil && len(same) > 1 {
			other := same[0]
			if other == i {
				other = same[1]
			}
			pe.err = configErr("model_metadata[%d]: model_path %q is also model_metadata[%d]", i, inferr.ClipN(pe.entry.Path, 200), other)
		}
		if pe.err != nil {
			cfg.Invalid = append(cfg.Invalid, EntryError{Index: i, Path: pe.entry.Path, Err: pe.err})
			continue
		}
		cfg.Models = append(cfg.Models, pe.entry)
	}
	return cfg, nil
}

// parseEntry parses one entry, which is valid JSON. On error it still
// returns the model_path the entry names, if it names one, so the watcher
// can leave that model as it was.
func parseEntry(i int, raw json.RawMessage) (ModelEntry, error) {
	var e ModelEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	t, _ := dec.Token() // raw is valid JSON
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return e, configErr("model_metadata[%d]: want an object, got %s", i, describeToken(t))
	}
	// Collect the fields first, so the model_path is known whatever field
	// is at fault and wherever it sits.
	type field struct {
		name  string
		value json.Token
		raw   json.RawMessage
	}
	var fields []field
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		kt, _ := dec.Token()
		key, _ := kt.(string)
		var v json.RawMessage
		_ = dec.Decode(&v) // valid JSON
		name := canonicalField(key)
		switch {
		case name == "":
			fail(fmt.Errorf("unknown field %q", inferr.ClipN(key, 80)))
			continue
		case seen[name]:
			fail(fmt.Errorf("duplicate field %q", name))
			continue
		}
		seen[name] = true
		vd := json.NewDecoder(bytes.NewReader(v))
		vd.UseNumber()
		vt, _ := vd.Token() // the first token tells the type; objects and arrays are wrong
		if name == "model_path" {
			if s, ok := vt.(string); ok {
				e.Path = s
			}
		}
		fields = append(fields, field{name, vt, v})
	}
	where := func() string {
		if e.Path != "" {
			return fmt.Sprintf("model_metadata[%d] (%q)", i, inferr.ClipN(e.Path, 200))
		}
		return fmt.Sprintf("model_metadata[%d]", i)
	}
	if firstErr != nil {
		return ModelEntry{Path: e.Path}, configErr("%s: %v", where(), firstErr)
	}
	for _, f := range fields {
		vt := f.value
		if vt == nil { // null: absent, as in protobuf JSON
			continue
		}
		if f.name == "external_variables" {
			ext, err := parseExternalVariables(f.raw)
			if err != nil {
				return ModelEntry{Path: e.Path}, configErr("%s: external_variables%v", where(), err)
			}
			if len(ext) > 0 {
				b, _ := json.Marshal(ext) // sorted keys
				e.ExternalVariables = ExternalVariables(b)
			}
			continue
		}
		if d, ok := vt.(json.Delim); ok && (d == '{' || d == '[') {
			return ModelEntry{Path: e.Path}, configErr("%s: %s: want a %s, got %s", where(), f.name, fieldKind(f.name), describeToken(vt))
		}
		switch f.name {
		case "model_path", "checksum", "warm_up_batch_request_json":
			s, ok := vt.(string)
			if !ok {
				return ModelEntry{Path: e.Path}, configErr("%s: %s: want a string, got %s", where(), f.name, describeToken(vt))
			}
			switch f.name {
			case "checksum":
				e.Checksum = s
			case "warm_up_batch_request_json":
				e.WarmUpJSON = s
			}
		case "stateful", "idle_sequence_cleanup", "low_latency_transformation":
			b, ok := vt.(bool)
			if !ok {
				return ModelEntry{Path: e.Path}, configErr("%s: %s: want true or false, got %s", where(), f.name, describeToken(vt))
			}
			if e.Sequences == nil {
				e.Sequences = &runtimes.SequenceSettings{}
			}
			switch f.name {
			case "stateful":
				e.Sequences.Stateful = b
			case "idle_sequence_cleanup":
				e.Sequences.IdleSequenceCleanup = &b
			default:
				e.Sequences.LowLatencyTransformation = &b
			}
		case "max_sequence_number":
			n, err := parseUint32(vt)
			if err != nil {
				return ModelEntry{Path: e.Path}, configErr("%s: max_sequence_number: %v", where(), err)
			}
			if e.Sequences == nil {
				e.Sequences = &runtimes.SequenceSettings{}
			}
			e.Sequences.MaxSequenceNumber = &n
		case "eviction_grace_period_in_ms":
			ms, err := parseGraceMillis(vt)
			if err != nil {
				return ModelEntry{Path: e.Path}, configErr("%s: eviction_grace_period_in_ms: %v", where(), err)
			}
			e.EvictionGrace = time.Duration(ms) * time.Millisecond
		}
	}
	if e.Path == "" {
		return ModelEntry{}, configErr("%s: model_path is missing or empty", where())
	}
	if e.Checksum != "" {
		if !isHexSHA256(e.Checksum) {
			return ModelEntry{Path: e.Path}, configErr("%s: checksum: want 64 hex digits (SHA-256), got %q", where(), inferr.ClipN(e.Checksum, 80))
		}
		e.Checksum = strings.ToLower(e.Checksum)
	}
	if e.WarmUpJSON != "" && !json.Valid([]byte(e.WarmUpJSON)) {
		return ModelEntry{Path: e.Path}, configErr("%s: warm_up_batch_request_json is not valid JSON", where())
	}
	if e.Sequences != nil {
		if err := e.Sequences.Validate(); err != nil {
			return ModelEntry{Path: e.Path}, configErr("%s: %v", where(), err)
		}
	}
	return e, nil
}

// maxExternalVariables bounds the variables one entry may name.
const maxExternalVariables = 256

// parseExternalVariables reads external_variables: an object of variable
// name -> store URL (varstore.ParseURL). Errors start with what follows
// "external_variables" in the message (": ..." or "[name]: ...").
func parseExternalVariables(raw json.RawMessage) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, _ := dec.Token() // raw is valid JSON
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf(": want an object of variable name -> %shost:port[,host:port...], got %s", varstore.Scheme, describeToken(t))
	}
	ext := map[string]string{}
	for dec.More() {
		kt, _ := dec.Token()
		name, _ := kt.(string)
		vt, _ := dec.Token()
		if d, ok := vt.(json.Delim); ok {
			return nil, fmt.Errorf("[%q]: want a %s URL string, got %s", inferr.ClipN(name, 80), varstore.Scheme, describeToken(d))
		}
		url, ok := vt.(string)
		switch {
		case name == "":
			return nil, fmt.Errorf(": an empty variable name")
		case !ok:
			return nil, fmt.Errorf("[%q]: want a %s URL string, got %s", inferr.ClipN(name, 80), varstore.Scheme, describeToken(vt))
		}
		if _, dup := ext[name]; dup {
			return nil, fmt.Errorf("[%q]: named twice", inferr.ClipN(name, 80))
		}
		if len(ext) == maxExternalVariables {
			return nil, fmt.Errorf(": more than %d variables", maxExternalVariables)
		}
		if _, err := varstore.ParseURL(url); err != nil {
			return nil, fmt.Errorf("[%q]: %s", inferr.ClipN(name, 80), inferr.ClipN(err.Error(), 200))
		}
		ext[name] = url
	}
	if len(ext) == 0 {
		return nil, nil
	}
	return ext, nil
}

// parseUint32 reads max_sequence_number: an integer from 0 to 2^32-1, as
// a number or a decimal string (protobuf JSON's forms of a uint32).
func parseUint32(t json.Token) (uint32, error) {
	var text string
	switch v := t.(type) {
	case json.Number:
		text = v.String()
	case string:
		text = v
	default:
		return 0, fmt.Errorf("want a number, got %s", describeToken(t))
	}
	n, err := strconv.ParseUint(text, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("want an integer from 1 to %d, got %s", uint64(math.MaxUint32), inferr.ClipN(text, 40))
	}
	return uint32(n), nil
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
	case "stateful":
		return "stateful"
	case "max_sequence_number", "maxSequenceNumber":
		return "max_sequence_number"
	case "idle_sequence_cleanup", "idleSequenceCleanup":
		return "idle_sequence_cleanup"
	case "low_latency_transformation", "lowLatencyTransformation":
		return "low_latency_transformation"
	case "external_variables", "externalVariables":
		return "external_variables"
	}
	return ""
}

func fieldKind(field string) string {
	switch field {
	case "eviction_grace_period_in_ms":
		return "number of milliseconds"
	case "max_sequence_number":
		return "number"
	case "stateful", "idle_sequence_cleanup", "low_latency_transformation":
		return "boolean"
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
			return 0, fmt.Errorf("want a whole number of milliseconds, got %q", inferr.ClipN(s, 40))
		}
		if f < math.MinInt32 || f > math.MaxInt32 {
			return 0, fmt.Errorf("%s is out of range 0..%d", inferr.ClipN(s, 40), math.MaxInt32)
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
		return fmt.Sprintf("the string %q", inferr.ClipN(v, 40))
	case json.Number:
		return "the number " + inferr.ClipN(v.String(), 40)
	case bool:
		return fmt.Sprintf("%t", v)
	}
	return fmt.Sprintf("%v", t)
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
