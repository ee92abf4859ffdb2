package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// modelStatus is one model as bidding-server's GET /v1/models describes it;
// a sidecar's answer is put in the same shape.
type modelStatus = sidecar.ModelStatus

// maxModelsAnswer bounds what is read of a bidding-server's answer.
const maxModelsAnswer = 64 << 20

// modelsCmd is `inferctl models`: the models of a sidecar (--socket) or of
// a bidding-server (--server, which adds the models the bucket sync failed
// to load or is draining), as a table or as JSON.
func modelsCmd(fs *flag.FlagSet) func(context.Context, *sidecar.Client, []string, stdio) error {
	server := fs.String("server", "", "a bidding-server's base URL (e.g. http://127.0.0.1:8080): ask its GET /v1/models instead of a sidecar (default: ask the sidecar at --socket)")
	asJSON := fs.Bool("json", false, "print JSON (the models array of GET /v1/models, or one model) instead of a table")
	return func(ctx context.Context, c *sidecar.Client, args []string, s stdio) error {
		if len(args) > 1 {
			return cli.Usagef("models takes at most one MODEL_PATH, got %s", strings.Join(args, " "))
		}
		var path string
		if len(args) == 1 {
			path = args[0]
		}
		var models []modelStatus
		var err error
		switch {
		case *server != "":
			models, err = serverModels(ctx, *server, path)
		case c != nil:
			models, err = sidecarModels(ctx, c, path)
		default:
			return cli.Usagef("models needs --socket PATH (a sidecar) or --server URL (a bidding-server)")
		}
		if err != nil {
			return err
		}
		if *asJSON {
			var v any = models
			if path != "" {
				v = models[0]
			}
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(s.out, "%s\n", b)
			return nil
		}
		printModels(s.out, models)
		return nil
	}
}

// sidecarModels asks a sidecar over its socket.
func sidecarModels(ctx context.Context, c *sidecar.Client, path string) ([]modelStatus, error) {
	infos, err := c.Models(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make([]modelStatus, len(infos))
	for i, in := range infos {
		out[i] = in.Status()
	}
	return out, nil
}

// serverModels asks a bidding-server's GET /v1/models (or
// /v1/models/MODEL_PATH).
func serverModels(ctx context.Context, server, path string) ([]modelStatus, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u := strings.TrimSuffix(server, "/") + "/v1/models"
	if path != "" {
		segs := strings.Split(path, "/")
		for i, s := range segs {
			segs[i] = url.PathEscape(s)
		}
		u += "/" + strings.Join(segs, "/")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, inferr.Errorf(inferr.InputParsing, "--server %q: %w", server, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, inferr.Errorf(inferr.GRPC, "GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsAnswer+1))
	if err != nil {
		return nil, inferr.Errorf(inferr.GRPC, "GET %s: %w", u, err)
	}
	if len(body) > maxModelsAnswer {
		return nil, inferr.Errorf(inferr.OutputParsing, "GET %s: the answer is larger than %d bytes", u, maxModelsAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		t := inferr.Unknown
		if resp.StatusCode == http.StatusNotFound {
			t = inferr.ModelNotFound
		}
		return nil, inferr.Errorf(t, "GET %s: %s: %s", u, resp.Status, inferr.Clip(msg))
	}
	if path != "" {
		var m modelStatus
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, inferr.Errorf(inferr.OutputParsing, "GET %s: the answer is not a model's status: %w", u, err)
		}
		return []modelStatus{m}, nil
	}
	var list struct {
		Models *[]modelStatus `json:"models"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Models == nil {
		if err == nil {
			err = errors.New(`no "models" array (a bidding-server older than the models array?)`)
		}
		return nil, inferr.Errorf(inferr.OutputParsing, "GET %s: %w", u, err)
	}
	return *list.Models, nil
}

// printModels writes the table, then a line per model with something to
// say: its last error, or until when it drains.
func printModels(w io.Writer, models []modelStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL_PATH\tSTATE\tCHECKSUM\tLOADED_AT\tINPUTS\tOUTPUTS")
	for _, m := range models {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ModelPath, m.State, orDash(shortChecksum(m.Checksum)), orDash(m.LoadedAt),
			orDash(formatSpecs(m.Inputs, m.Positional)), orDash(formatSpecs(m.Outputs, false)))
	}
	tw.Flush()
	for _, m := range models {
		if m.EvictAt != "" {
			fmt.Fprintf(w, "%s: draining: serves until %s\n", m.ModelPath, m.EvictAt)
		}
		if m.ListedChecksum != "" && m.Checksum != "" {
			// What serves is not what the config lists: an update waits
			// for the grace period, or failed.
			fmt.Fprintf(w, "%s: the config lists checksum %s\n", m.ModelPath, m.ListedChecksum)
		}
		if m.LastError != "" {
			fmt.Fprintf(w, "%s: last error", m.ModelPath)
			if m.Failures > 0 {
				fmt.Fprintf(w, " (%d in a row, last at %s)", m.Failures, m.LastErrorAt)
			}
			fmt.Fprintf(w, ": %s\n", m.LastError)
		}
	}
}

// shortChecksum is the first 12 hex digits, enough to tell versions
// apart; --json has them all.
func shortChecksum(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// formatSpecs is "name:DTYPE[shape]" per tensor, by the name a request
// uses (the first alias: TensorFlow's signature key).
func formatSpecs(specs []sidecar.StatusTensorSpec, positional bool) string {
	parts := make([]string, 0, len(specs))
	for _, s := range specs {
		name := s.Name
		if len(s.Aliases) > 0 {
			name = s.Aliases[0]
		}
		dt := s.DType
		if dt == "UNSPECIFIED" {
			dt = "?"
		}
		shape := "[?]"
		if s.Shape != nil {
			shape = tensor.FormatShape(s.Shape)
		}
		p := name + ":" + dt + shape
		if s.Optional {
			p += "(optional)"
		}
		parts = append(parts, p)
	}
	if positional && len(parts) == 0 {
		return "(positional)"
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// maxPredictAnswer bounds a bidding-server's answer to a batch.
const maxPredictAnswer = 64 << 20

// serverPredict runs a batch through a bidding-server's POST /v1/predict:
// the response JSON (entry errors in it), or the batch's error, typed as
// the server's batch error JSON says.
func serverPredict(ctx context.Context, server string, batchJSON []byte) ([]byte, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u := strings.TrimSuffix(server, "/") + "/v1/predict"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(batchJSON))
	if err != nil {
		return nil, inferr.Errorf(inferr.InputParsing, "--server %q: %w", server, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, inferr.Errorf(inferr.GRPC, "POST %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPredictAnswer+1))
	if err != nil {
		return nil, inferr.Errorf(inferr.GRPC, "POST %s: %w", u, err)
	}
	if len(body) > maxPredictAnswer {
		return nil, inferr.Errorf(inferr.OutputParsing, "POST %s: the answer is larger than %d bytes", u, maxPredictAnswer)
	}
	body = bytes.TrimSpace(body)
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	// runInference's batch error ({"response":[{"error":{...}}]}) or the
	// server's own ({"error": "..."}).
	if e := gjson.GetBytes(body, "response.0.error"); e.Exists() {
		return nil, inferr.Errorf(inferr.ParseType(e.Get("error_type").String()), "%s", e.Get("description").String())
	}
	msg := strings.TrimSpace(string(body))
	if e := gjson.GetBytes(body, "error"); e.Type == gjson.String {
		msg = e.String()
	}
	return nil, inferr.Errorf(inferr.Unknown, "POST %s: %s: %s", u, resp.Status, inferr.Clip(msg))
}
