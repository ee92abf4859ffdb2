package codestore

import (
	"strings"
	"testing"
	"time"
)

func TestParseFetchConfig(t *testing.T) {
	good := []struct {
		in   string
		want FetchConfig
	}{
		{`{"fetchMode":"BUCKET","protectedAuctionBiddingJsBucket":"file:///tmp/code","protectedAuctionBiddingJsBucketDefaultBlob":"bid.js","urlFetchPeriodMs":5000}`,
			FetchConfig{Mode: ModeBucket, Bucket: "file:///tmp/code", DefaultBlob: "bid.js", Period: 5 * time.Second}},
		{`{"fetch_mode":1,"protected_auction_bidding_js_bucket":"gs://b","protected_auction_bidding_js_bucket_default_blob":"x"}`,
			FetchConfig{Mode: ModeBucket, Bucket: "gs://b", DefaultBlob: "x"}},
		{`{"fetchMode":"FETCH_MODE_URL","biddingJsUrl":"https://example.com/bid.js","biddingWasmHelperUrl":"https://example.com/bid.wasm","urlFetchTimeoutMs":"2500"}`,
			FetchConfig{Mode: ModeURL, JSURL: "https://example.com/bid.js", WasmURL: "https://example.com/bid.wasm", Timeout: 2500 * time.Millisecond}},
		{`{"fetchMode":"LOCAL","biddingJsPath":"/srv/bid.js"}`, FetchConfig{Mode: ModeLocal, LocalPath: "/srv/bid.js"}},
		{`{"fetchMode":2,"biddingJsPath":"bid.js"}`, FetchConfig{Mode: ModeLocal, LocalPath: "bid.js"}},
		{`{"fetchMode":"LOCAL","biddingJsPath":"bid.js","enableBuyerDebugUrlGeneration":false,"protected_app_signals_bidding_js_url":""}`, FetchConfig{Mode: ModeLocal, LocalPath: "bid.js"}},
	}
	for _, c := range good {
		got, err := ParseFetchConfig([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, want string }{
		{`{"fetchMode":"BUCKET","protectedAuctionBiddingJsBucket":"file:///x","protectedAuctionBiddingJsBucketDefaultBlob":"b","biddingJsUrl":"http://x/y"}`, "biddingJsUrl is set, but fetchMode is BUCKET"},
		{`{"fetchMode":"BUCKET","protectedAuctionBiddingJsBucket":"file:///x"}`, "needs protectedAuctionBiddingJsBucketDefaultBlob"},
		{`{"fetchMode":"URL"}`, "needs biddingJsUrl"},
		{`{"fetchMode":"URL","biddingJsUrl":"ftp://x/y"}`, "biddingJsUrl \"ftp://x/y\": want an http"},
		{`{"fetchMode":"LOCAL","biddingJsPath":"a","protectedAuctionBiddingJsBucket":"file:///x"}`, "protectedAuctionBiddingJsBucket is set"},
		{`{"fetchMode":"BUCKETS"}`, "fetchMode: want LOCAL, BUCKET or URL"},
		{`{"biddingJsPath":"a"}`, "fetchMode is required"},
		{`{"fetchMode":"LOCAL","biddingJsPath":"a","biddingJSPath":"b"}`, `unknown field "biddingJSPath"`},
		{`{"fetchMode":"LOCAL","biddingJsPath":"a","bidding_js_path":"b"}`, "biddingJsPath given twice"},
		{`{"fetchMode":"URL","biddingJsUrl":"http://x/y","urlFetchPeriodMs":-1}`, "urlFetchPeriodMs: want a number"},
		{`{"fetchMode":"URL","biddingJsUrl":"http://x/y","urlFetchTimeoutMs":[5]}`, "urlFetchTimeoutMs: want a number"},
		{`{"fetchMode":"URL","biddingJsUrl":"http://x/y","url_fetch_timeout_ms":true}`, "urlFetchTimeoutMs: want a number"},
		{`{"fetchMode":"LOCAL","biddingJsPath":7}`, "biddingJsPath: want a string"},
		{`[1]`, "not a JSON object"},
		{`{"fetchMode":"LOCAL","biddingJsPath":"a","enableAdtechCodeLogging":true}`, "enableAdtechCodeLogging is B&A's field for console logging"},
		{`{"fetchMode":"LOCAL","biddingJsPath":"a","ads_retrieval_js_bucket":"gs://x"}`, "ads_retrieval_js_bucket is B&A's field for ads retrieval"},
		{`{"fetchMode":"LOCAL","biddingJsPath":"a"} {}`, "text after"},
	}
	for _, c := range bad {
		_, err := ParseFetchConfig([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.in, err, c.want)
		}
	}
}
