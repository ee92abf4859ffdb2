package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/sidecar"
)

// maxIndexBytes bounds the variables.index read (the index, not the data:
// a few bytes per tensor).
const maxIndexBytes = 256 << 20

// variablesCmd is `inferctl variables DIR`: the checkpoint tensors of a
// local SavedModel (name, dtype, shape, bytes), read from its
// variables/variables.index alone.
func variablesCmd(fset *flag.FlagSet) func(context.Context, *sidecar.Client, []string, stdio) error {
	asJSON := fset.Bool("json", false, "print a JSON array instead of a table")
	return func(_ context.Context, _ *sidecar.Client, args []string, s stdio) error {
		if len(args) != 1 {
			return cli.Usagef("variables takes one SavedModel DIR")
		}
		_, ts, err := readIndex("variables", args[0])
		if err != nil {
			return err
		}
		if *asJSON {
			if ts == nil {
				ts = []tensorflow.CheckpointTensor{}
			}
			enc := json.NewEncoder(s.out)
			enc.SetIndent("", "  ")
			return enc.Encode(ts)
		}
		w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tDTYPE\tSHAPE\tBYTES")
		var total int64
		for _, t := range ts {
			shape := "?"
			if t.Shape != nil {
				dims := make([]string, len(t.Shape))
				for i, d := range t.Shape {
					dims[i] = fmt.Sprint(d)
				}
				shape = "[" + strings.Join(dims, ",") + "]"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", t.Name, t.DType, shape, t.Bytes)
			total += t.Bytes
		}
		fmt.Fprintf(w, "(%d tensors)\t\t\t%d\n", len(ts), total)
		return w.Flush()
	}
}

// readIndex finds the checkpoint index of the SavedModel in dir
// (findIndex), reads it (at most maxIndexBytes) and lists its tensors;
// cmd names the command in errors.
func readIndex(cmd, dir string) (index string, ts []tensorflow.CheckpointTensor, err error) {
	if index, err = findIndex(dir); err != nil {
		return "", nil, err
	}
	st, err := os.Stat(index)
	if err != nil {
		return "", nil, inferr.Wrap(inferr.ModelNotFound, err, cmd+" "+dir)
	}
	if st.Size() > maxIndexBytes {
		return "", nil, inferr.Errorf(inferr.InputParsing, "%s %s: %s is %d bytes, more than %d", cmd, dir, index, st.Size(), maxIndexBytes)
	}
	b, err := os.ReadFile(index)
	if err != nil {
		return "", nil, inferr.Wrap(inferr.ModelNotFound, err, cmd+" "+dir)
	}
	if ts, err = tensorflow.CheckpointTensors(b); err != nil {
		return "", nil, inferr.Wrap(inferr.InputParsing, err, index)
	}
	return index, ts, nil
}

// findIndex finds the shallowest variables/variables.index in dir: at its
// root, or in a versioned folder. Unlike the runtime (modelRoot), it does
// not look for saved_model.pb, so a bare checkpoint folder lists too.
func findIndex(dir string) (string, error) {
	best := ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "variables.index" && filepath.Base(filepath.Dir(p)) == "variables" && (best == "" || len(p) < len(best)) {
			best = p
		}
		return nil
	})
	if err != nil {
		return "", inferr.Wrap(inferr.ModelNotFound, err, "variables "+dir)
	}
	if best == "" {
		return "", inferr.Errorf(inferr.ModelNotFound, "variables %s: no variables/variables.index in it (a SavedModel without variables, or not a SavedModel)", dir)
	}
	return best, nil
}
