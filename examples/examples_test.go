package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferbid/inferbid/examples"
	"github.com/inferbid/inferbid/examples/internal/bucketgen"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/modelstore"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// TestBucketIsUpToDate: the committed bucket is what the generator writes.
func TestBucketIsUpToDate(t *testing.T) {
	fresh := t.TempDir()
	if err := bucketgen.Write(fresh); err != nil {
		t.Fatal(err)
	}
	count := 0
	err := filepath.WalkDir(fresh, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fresh, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join("bucket", rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("bucket/%s differs from the generator's output; run: go generate ./examples", rel)
		}
		count++
		return nil
	})
	if err != nil || count == 0 {
		t.Fatalf("walk: %v (%d files)", err, count)
	}
}

// TestBucketChecksums: every config checksum is the model directory's.
func TestBucketChecksums(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("bucket", bucketgen.ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := modelstore.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 3 {
		t.Fatalf("%d models in the config, want 3", len(cfg.Models))
	}
	for _, m := range cfg.Models {
		sum, err := modelfiles.ChecksumPath(filepath.Join("bucket", filepath.FromSlash(m.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if sum != m.Checksum {
			t.Errorf("%s: config checksum %s, files %s", m.Path, m.Checksum, sum)
		}
	}
}

// TestGenerateBid runs the sample module against the sample models served
// by the TensorFlow runtime behind a real sidecar socket, and checks each
// bid against the models run directly.
func TestGenerateBid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, direct := serveExampleModels(t, ctx)

	pool, err := jsbridge.New("generate_bid.js", examples.GenerateBidJS, jsbridge.Options{Inference: client, Size: 2, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var req struct {
		IGs []struct {
			Name string `json:"name"`
			UBS  struct {
				Dense []float32 `json:"dense"`
			} `json:"user_bidding_signals"`
			Ads []struct {
				Render string `json:"render_url"`
				MD     struct {
					AdID       int64   `json:"ad_id"`
					CampaignID int64   `json:"campaign_id"`
					Value      float64 `json:"value"`
				} `json:"metadata"`
			} `json:"ads"`
		} `json:"interest_groups"`
		PerBuyer struct {
			Features []float64 `json:"features"`
		} `json:"per_buyer_signals"`
		Browser struct {
			Publisher int64 `json:"publisher_id"`
			Country   int64 `json:"country_id"`
		} `json:"browser_signals"`
	}
	if err := json.Unmarshal(examples.SampleRequest, &req); err != nil {
		t.Fatal(err)
	}
	var sig map[string]json.RawMessage
	if err := json.Unmarshal(examples.SampleRequest, &sig); err != nil {
		t.Fatal(err)
	}
	var igs []json.RawMessage
	if err := json.Unmarshal(sig["interest_groups"], &igs); err != nil {
		t.Fatal(err)
	}

	for i, ig := range req.IGs {
		out, err := pool.CallJSON(ctx, "generateBid", igs[i], sig["auction_signals"], sig["per_buyer_signals"], sig["trusted_bidding_signals"], sig["browser_signals"])
		if err != nil {
			t.Fatalf("%s: %v", ig.Name, err)
		}
		var bid struct {
			Render     string   `json:"render"`
			Bid        float64  `json:"bid"`
			ModelPaths []string `json:"model_paths"`
		}
		if err := json.Unmarshal(out, &bid); err != nil {
			t.Fatal(err)
		}
		if len(bid.ModelPaths) != 2 || bid.ModelPaths[0] != "pctr/v2/" || bid.ModelPaths[1] != "pcvr/v1/" {
			t.Errorf("%s: models %v, want the latest [pctr/v2/ pcvr/v1/]", ig.Name, bid.ModelPaths)
		}
		// The best ad by value * pctr * pcvr, computed with the models run
		// directly (no JS, no JSON, no socket).
		best, bestRender := -1.0, ""
		for _, ad := range ig.Ads {
			pctrOut, err := direct["pctr/v2/"].Predict(ctx, []tensor.Tensor{
				tensor.New("ad_id", []int64{1, 1}, []int64{ad.MD.AdID % 100}),
				tensor.New("publisher_id", []int64{1, 1}, []int64{req.Browser.Publisher % 50}),
				tensor.New("dense", []int64{1, 6}, ig.UBS.Dense),
			})
			if err != nil {
				t.Fatal(err)
			}
			pcvrOut, err := direct["pcvr/v1/"].Predict(ctx, []tensor.Tensor{
				tensor.New("campaign_id", []int64{1, 1}, []int64{ad.MD.CampaignID % 64}),
				tensor.New("country_id", []int64{1, 1}, []int64{req.Browser.Country % 32}),
				tensor.New("features", []int64{1, 5}, req.PerBuyer.Features),
			})
			if err != nil {
				t.Fatal(err)
			}
			pctr, _ := tensor.Data[float32](pctrOut[0])
			pcvr, _ := tensor.Data[float32](pcvrOut[0])
			if b := ad.MD.Value * float64(pctr[0]) * float64(pcvr[0]); b > best {
				best, bestRender = b, ad.Render
			}
		}
		if bid.Render != bestRender || math.Abs(bid.Bid-best) > 1e-12*best {
			t.Errorf("%s: bid %v on %s, want %v on %s", ig.Name, bid.Bid, bid.Render, best, bestRender)
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serveExampleModels serves the models of bucket/ with the TensorFlow
// runtime behind a real sidecar socket, and returns a client of it and the
// same models loaded directly (no socket), by model path.
func serveExampleModels(t *testing.T, ctx context.Context) (*sidecar.Client, map[string]*runtimes.Model) {
	t.Helper()
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Logger: quietLogger()}, sidecar.ClientOptions{})
	direct := map[string]*runtimes.Model{}
	for _, m := range bucketgen.Models() {
		files, err := modelfiles.ReadLocal(filepath.Join("bucket", filepath.FromSlash(m.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if err := client.RegisterModel(ctx, m.Path, files, m.WarmUp); err != nil {
			t.Fatal(err)
		}
		if direct[m.Path], err = rt.Load(ctx, m.Path, files); err != nil {
			t.Fatal(err)
		}
	}
	return client, direct
}
