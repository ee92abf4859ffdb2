//go:build cgo

package bench

import (
	"context"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/runtimes"
)

// inProcess is a jsbridge.Inference that runs every entry on the bare
// runtime in this process: the js-inproc row, which shows what the JS
// layer costs without the process boundary.
type inProcess struct {
	path  string
	model *runtimes.Model
}

func (p inProcess) Predict(ctx context.Context, entries []batch.Entry) ([]batch.Result, error) {
	res := make([]batch.Result, len(entries))
	for i, e := range entries {
		res[i].ModelPath = e.ModelPath
		if e.Err != nil {
			res[i].Err = e.Err
			continue
		}
		res[i].Tensors, res[i].Err = p.model.Predict(ctx, e.Tensors)
	}
	return res, nil
}

func (p inProcess) ModelPaths(context.Context) ([]string, error) { return []string{p.path}, nil }
