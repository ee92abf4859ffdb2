package codestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FetchMode is how the bidding code is delivered, as B&A's
// buyer_code_fetch_config names it.
type FetchMode int

// The fetch modes, numbered as in B&A's blob_fetch FetchMode enum.
const (
	ModeURL    FetchMode = 0
	ModeBucket FetchMode = 1
	ModeLocal  FetchMode = 2
)

func (m FetchMode) String() string {
	switch m {
	case ModeURL:
		return "URL"
	case ModeBucket:
		return "BUCKET"
	case ModeLocal:
		return "LOCAL"
	}
	return "FetchMode(" + strconv.Itoa(int(m)) + ")"
}

// FetchConfig is a parsed buyer_code_fetch_config.
type FetchConfig struct {
	Mode FetchMode
	// LocalPath is biddingJsPath (LOCAL).
	LocalPath string
	// Bucket is protectedAuctionBiddingJsBucket, a gocloud bucket URL, and
	// DefaultBlob protectedAuctionBiddingJsBucketDefaultBlob (BUCKET).
	Bucket      string
	DefaultBlob string
	// JSURL and WasmURL are biddingJsUrl and biddingWasmHelperUrl (URL).
	JSURL   string
	WasmURL string
	// Period is urlFetchPeriodMs (URL and BUCKET polls; 0 = the default);
	// Timeout is urlFetchTimeoutMs (one fetch; 0 = the default).
	Period  time.Duration
	Timeout time.Duration
}

// Defaults of a FetchConfig.
const (
	DefaultPeriod  = 60 * time.Second
	DefaultTimeout = 30 * time.Second
)

// fields are the fields read, by B&A's lowerCamelCase JSON names; its
// proto's snake_case names are accepted too (camel).
var fields = map[string]bool{
	"fetchMode": true, "biddingJsPath": true, "protectedAuctionBiddingJsBucket": true,
	"protectedAuctionBiddingJsBucketDefaultBlob": true, "biddingJsUrl": true,
	"biddingWasmHelperUrl": true, "urlFetchPeriodMs": true, "urlFetchTimeoutMs": true,
}

// unsupported are the other fields of B&A's BuyerCodeFetchConfig (its
// lowerCamelCase JSON names), with what they are for. A config copied from
// B&A may carry them at their zero value (false, "", 0), which asks for
// nothing and is accepted; any other value is an error naming the field.
var unsupported = map[string]string{
	"enableBuyerDebugUrlGeneration":                      "debug URL generation",
	"enableAdtechCodeLogging":                            "console logging (inferbid: --consented_debug_token, --js_log_console_unsafe)",
	"enablePrivateAggregateReporting":                    "private aggregate reporting",
	"protectedAppSignalsBiddingJsUrl":                    "protected app signals",
	"protectedAppSignalsBiddingWasmHelperUrl":            "protected app signals",
	"protectedAppSignalsBiddingJsBucket":                 "protected app signals",
	"protectedAppSignalsBiddingJsBucketDefaultBlob":      "protected app signals",
	"prepareDataForAdsRetrievalJsUrl":                    "ads retrieval",
	"prepareDataForAdsRetrievalWasmHelperUrl":            "ads retrieval",
	"adsRetrievalJsBucket":                               "ads retrieval",
	"adsRetrievalBucketDefaultBlob":                      "ads retrieval",
	"biddingExecutablePath":                              "bring-your-own-binary executables",
	"biddingExecutableUrl":                               "bring-your-own-binary executables",
	"protectedAuctionBiddingExecutableBucket":            "bring-your-own-binary executables",
	"protectedAuctionBiddingExecutableBucketDefaultBlob": "bring-your-own-binary executables",
}

// camel is a snake_case name in lowerCamelCase.
func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// isZeroJSON reports whether v is false, "", 0 or null.
func isZeroJSON(v json.RawMessage) bool {
	switch strings.TrimSpace(string(v)) {
	case "false", `""`, "0", `"0"`, "null":
		return true
	}
	return false
}

// ParseFetchConfig parses a buyer_code_fetch_config JSON object. Unknown
// fields, a field given twice, a wrong type and contradictory settings
// (a bucket in URL mode, a URL in BUCKET mode, a missing required field)
// are errors naming the field; B&A's fields for what inferbid does not do
// (protected app signals, ads retrieval, executables, debug URLs) are
// accepted at their zero value only. fetchMode is "LOCAL", "BUCKET" or "URL"
// (or "FETCH_MODE_…", or B&A's number); numbers may be JSON strings, as
// protobuf JSON allows for int64.
func ParseFetchConfig(data []byte) (FetchConfig, error) {
	var c FetchConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return c, fmt.Errorf("buyer_code_fetch_config: not a JSON object: %w", err)
	}
	if raw == nil {
		return c, errors.New("buyer_code_fetch_config: not a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return c, errors.New("buyer_code_fetch_config: text after the JSON object")
	}
	set := map[string]json.RawMessage{}
	for k, v := range raw {
		name := camel(k)
		ok := fields[name]
		if what, known := unsupported[name]; !ok && known {
			if isZeroJSON(v) {
				continue
			}
			return c, fmt.Errorf("buyer_code_fetch_config: %s is B&A's field for %s, which inferbid does not implement; remove it (or leave it at false or \"\")", k, what)
		}
		if !ok {
			return c, fmt.Errorf("buyer_code_fetch_config: unknown field %q", k)
		}
		if _, dup := set[name]; dup {
			return c, fmt.Errorf("buyer_code_fetch_config: field %s given twice", name)
		}
		set[name] = v
	}
	str := func(name string) (string, error) {
		v, ok := set[name]
		if !ok {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("buyer_code_fetch_config: %s: want a string, got %s", name, v)
		}
		return s, nil
	}
	ms := func(name string) (time.Duration, error) {
		v, ok := set[name]
		if !ok {
			return 0, nil
		}
		// A JSON number, or a string holding one (protobuf JSON's int64).
		var text string
		if json.Unmarshal(v, &text) != nil {
			var num json.Number
			if json.Unmarshal(v, &num) != nil {
				return 0, fmt.Errorf("buyer_code_fetch_config: %s: want a number of milliseconds >= 0, got %s", name, v)
			}
			text = num.String()
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n < 0 || n > int64(time.Duration(1<<62)/time.Millisecond) {
			return 0, fmt.Errorf("buyer_code_fetch_config: %s: want a number of milliseconds >= 0, got %s", name, v)
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	var err error
	if c.LocalPath, err = str("biddingJsPath"); err != nil {
		return c, err
	}
	if c.Bucket, err = str("protectedAuctionBiddingJsBucket"); err != nil {
		return c, err
	}
	if c.DefaultBlob, err = str("protectedAuctionBiddingJsBucketDefaultBlob"); err != nil {
		return c, err
	}
	if c.JSURL, err = str("biddingJsUrl"); err != nil {
		return c, err
	}
	if c.WasmURL, err = str("biddingWasmHelperUrl"); err != nil {
		return c, err
	}
	if c.Period, err = ms("urlFetchPeriodMs"); err != nil {
		return c, err
	}
	if c.Timeout, err = ms("urlFetchTimeoutMs"); err != nil {
		return c, err
	}
	mode, ok := set["fetchMode"]
	if !ok {
		return c, errors.New("buyer_code_fetch_config: fetchMode is required (LOCAL, BUCKET or URL)")
	}
	if c.Mode, err = parseMode(mode); err != nil {
		return c, err
	}
	return c, c.check()
}

func parseMode(v json.RawMessage) (FetchMode, error) {
	var s string
	if json.Unmarshal(v, &s) != nil {
		s = string(v)
	}
	switch strings.TrimPrefix(strings.ToUpper(s), "FETCH_MODE_") {
	case "URL", "0":
		return ModeURL, nil
	case "BUCKET", "1":
		return ModeBucket, nil
	case "LOCAL", "2":
		return ModeLocal, nil
	}
	return 0, fmt.Errorf("buyer_code_fetch_config: fetchMode: want LOCAL, BUCKET or URL (or B&A's 2, 1, 0), got %s", v)
}

// check rejects contradictory or incomplete settings, naming the field.
func (c FetchConfig) check() error {
	forbid := func(field, value string) error {
		if value != "" {
			return fmt.Errorf("buyer_code_fetch_config: %s is set, but fetchMode is %s, which does not use it", field, c.Mode)
		}
		return nil
	}
	require := func(field, value string) error {
		if value == "" {
			return fmt.Errorf("buyer_code_fetch_config: fetchMode %s needs %s", c.Mode, field)
		}
		return nil
	}
	var errs []error
	switch c.Mode {
	case ModeLocal:
		errs = append(errs, require("biddingJsPath", c.LocalPath), forbid("protectedAuctionBiddingJsBucket", c.Bucket),
			forbid("protectedAuctionBiddingJsBucketDefaultBlob", c.DefaultBlob), forbid("biddingJsUrl", c.JSURL), forbid("biddingWasmHelperUrl", c.WasmURL))
	case ModeBucket:
		errs = append(errs, require("protectedAuctionBiddingJsBucket", c.Bucket), require("protectedAuctionBiddingJsBucketDefaultBlob", c.DefaultBlob),
			forbid("biddingJsPath", c.LocalPath), forbid("biddingJsUrl", c.JSURL), forbid("biddingWasmHelperUrl", c.WasmURL))
		if c.Bucket != "" {
			if u, err := url.Parse(c.Bucket); err != nil || u.Scheme == "" {
				errs = append(errs, fmt.Errorf("buyer_code_fetch_config: protectedAuctionBiddingJsBucket %q: want a bucket URL (file:///dir, s3://bucket, gs://bucket)", c.Bucket))
			}
		}
	case ModeURL:
		errs = append(errs, require("biddingJsUrl", c.JSURL), forbid("biddingJsPath", c.LocalPath),
			forbid("protectedAuctionBiddingJsBucket", c.Bucket), forbid("protectedAuctionBiddingJsBucketDefaultBlob", c.DefaultBlob))
		for _, f := range []struct{ field, v string }{{"biddingJsUrl", c.JSURL}, {"biddingWasmHelperUrl", c.WasmURL}} {
			if f.v == "" {
				continue
			}
			if u, err := url.Parse(f.v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("buyer_code_fetch_config: %s %q: want an http:// or https:// URL", f.field, f.v))
			}
		}
	}
	return errors.Join(errs...)
}
