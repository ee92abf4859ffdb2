package sidecar

import (
	"context"
	"sort"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/varstore"
)

// withExternalVariables returns ctx carrying a registration's external
// variables (runtimes.LoadOptions) for the runtime's load, keyed by
// checksum(), the checksum of the files received (modelfiles.Checksum: the
// one the model_metadata config and inferctl export-variables compute), so
// that the rows read are those exported for exactly these files. Names and
// URLs are checked here: errors are INPUT_PARSING, naming the model path
// and the variable.
func withExternalVariables(ctx context.Context, path string, ext map[string]string, checksum func() string) (context.Context, error) {
	if len(ext) == 0 {
		return ctx, nil
	}
	names := make([]string, 0, len(ext))
	for name := range ext {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "" {
			return ctx, inferr.Errorf(inferr.InputParsing, "register model %s: external_variables: an empty variable name", inferr.Quote(path))
		}
		if _, err := varstore.ParseURL(ext[name]); err != nil {
			return ctx, inferr.Errorf(inferr.InputParsing, "register model %s: external_variables[%s]: %v", inferr.Quote(path), inferr.Quote(name), err)
		}
	}
	return runtimes.WithLoadOptions(ctx, runtimes.LoadOptions{Checksum: checksum(), ExternalVariables: ext}), nil
}
