package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
)

var generators = map[string]func(tfsave.Options) (map[string][]byte, error){
	"pctr":       tfsave.PCTRModel,
	"pcvr":       tfsave.PCVRModel,
	"mlp":        tfsave.MLP,
	"counter":    func(o tfsave.Options) (map[string][]byte, error) { return tfsave.CounterModel(o, 1) },
	"affine_v1":  func(o tfsave.Options) (map[string][]byte, error) { return tfsave.AffineModel(o, 2, 1) },
	"affine_v2":  func(o tfsave.Options) (map[string][]byte, error) { return tfsave.AffineModel(o, 3, -1) },
	"all_dtypes": tfsave.AllDTypesModel,
}

func main() { cli.Main("gen-tf-models", run) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen-tf-models", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write the model directories into (required)")
	style := fs.String("style", "tf2", "layout: tf2, function, graph or tf1")
	models := fs.String("models", "pctr,pcvr,counter,mlp", "comma-separated models to write: "+strings.Join(names(), ","))
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	return write(stdout, *out, *style, *models)
}

func names() []string {
	var n []string
	for k := range generators {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// write writes models in style under out and prints each model's
// directory and checksum to stdout.
func write(stdout io.Writer, out, style, models string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	var opts tfsave.Options
	switch style {
	case "tf2":
		opts.FunctionCall, opts.TracedSaver = true, true
	case "function":
		opts.FunctionCall = true
	case "graph":
	case "tf1":
		opts.Variables = tfsave.RefVariables
	default:
		return fmt.Errorf("-style %q: want tf2, function, graph or tf1", style)
	}
	for _, name := range strings.Split(models, ",") {
		gen, ok := generators[name]
		if !ok {
			return fmt.Errorf("unknown model %q (known: %s)", name, strings.Join(names(), ", "))
		}
		files, err := gen(opts)
		if err != nil {
			return fmt.Errorf("model %s: %w", name, err)
		}
		dir := filepath.Join(out, name)
		// Remove what an earlier run wrote, so a model without variables
		// leaves no stale checkpoint behind.
		for _, f := range []string{tfsave.SavedModelFile, tfsave.VariablesIndex, tfsave.VariablesData} {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(f))); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		for p, b := range files {
			path := filepath.Join(dir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "%s\t%s\n", dir, checksum(files))
	}
	return nil
}

// checksum is the team's model checksum: the hex SHA-256 of each file,
// sorted by path, concatenated, hashed again.
func checksum(files map[string][]byte) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var cat strings.Builder
	for _, p := range paths {
		s := sha256.Sum256(files[p])
		cat.WriteString(hex.EncodeToString(s[:]))
	}
	s := sha256.Sum256([]byte(cat.String()))
	return hex.EncodeToString(s[:])
}
