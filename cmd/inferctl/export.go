package main

import (
	"context"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/varstore"
)

// exportChunkBytes is about how much of a table one pipelined write
// carries (whole rows).
const exportChunkBytes = 4 << 20

// exportCmd is `inferctl export-variables DIR --variable NAME --store URL
// --model-path P`: writes a checkpoint variable's rows to a store under
// the keys the server reads (varstore: the model's checksum as the config
// computes it, the variable, the row). The tensor's CRC32C is checked
// first; rows go in chunks, progress on stderr, and the count written is
// recorded in the store after each chunk, so a run that stopped resumes
// there (--restart starts over). Writing a row again is harmless.
func exportCmd(fset *flag.FlagSet) func(context.Context, *sidecar.Client, []string, stdio) error {
	variable := fset.String("variable", "", "the checkpoint key of the variable to export (required; no default; inferctl variables lists them)")
	store := fset.String("store", "", "the store, redis-cluster://host:port[,host:port...] (required; no default)")
	modelPath := fset.String("model-path", "", "the model path the config lists the model under (required; no default; named in progress and errors)")
	restart := fset.Bool("restart", false, "write every row again instead of resuming after the rows a previous run recorded")
	return func(ctx context.Context, _ *sidecar.Client, args []string, s stdio) error {
		if len(args) != 1 || *variable == "" || *store == "" || *modelPath == "" {
			return cli.Usagef("export-variables takes one SavedModel DIR, --variable NAME, --store URL and --model-path P")
		}
		dir := args[0]
		index, ts, err := readIndex("export-variables", dir)
		if err != nil {
			return err
		}
		var t *tensorflow.CheckpointTensor
		for i := range ts {
			if ts[i].Name == *variable {
				t = &ts[i]
			}
		}
		if t == nil {
			return inferr.Errorf(inferr.InputParsing, "export-variables %s: no variable %q in %s (inferctl variables lists them)", dir, *variable, index)
		}
		rows, rowBytes, ok := tableRows(t)
		if !ok {
			return inferr.Errorf(inferr.InputParsing, "export-variables %s: variable %q (%s %v, %d bytes at %d) is not a table of rows", dir, *variable, t.DType, t.Shape, t.Bytes, t.Offset)
		}
		data := filepath.Join(filepath.Dir(index), fmt.Sprintf("variables.data-%05d-of-", t.Shard))
		matches, _ := filepath.Glob(data + "*")
		if len(matches) != 1 {
			return inferr.Errorf(inferr.ModelNotFound, "export-variables %s: no single data shard %s*", dir, data)
		}
		f, err := os.Open(matches[0])
		if err != nil {
			return inferr.Wrap(inferr.ModelNotFound, err, "export-variables "+dir)
		}
		defer f.Close()
		sec := io.NewSectionReader(f, t.Offset, t.Bytes)
		// The table's CRC32C is taken on the model checksum's read of the
		// shard (one read, not two), and checked before anything is written.
		crc := &sectionCRC{off: t.Offset, n: t.Bytes}
		shard := filepath.Clean(matches[0])
		sum, err := modelfiles.ChecksumPathTee(dir, func(local string) io.Writer {
			if filepath.Clean(local) == shard {
				crc.seen = true
				return crc
			}
			return nil
		})
		if err != nil {
			return localModelError(dir, err)
		}
		if !crc.seen { // the shard is not one of the model's regular files (a symlink)
			crc.pos = t.Offset
			if _, err := io.Copy(crc, sec); err != nil {
				return inferr.Wrap(inferr.InputParsing, err, matches[0])
			}
		}
		if crc.pos < t.Offset+t.Bytes {
			return inferr.Errorf(inferr.InputParsing, "export-variables %s: variable %q: %s ends at byte %d, before the table's end (%d)", dir, *variable, matches[0], crc.pos, t.Offset+t.Bytes)
		}
		if got := tensorflow.MaskCRC(crc.sum); got != t.CRC32C {
			return inferr.Errorf(inferr.InputParsing, "export-variables %s: variable %q: crc32c %08x, the index says %08x (a corrupt checkpoint)", dir, *variable, got, t.CRC32C)
		}
		st, err := varstore.Open(*store, varstore.Options{CacheRows: -1})
		if err != nil {
			return err
		}
		defer st.Close()
		from := int64(0)
		if !*restart {
			if from, err = st.ExportedRows(ctx, sum, *variable); err != nil {
				return err
			}
			from = min(max(from, 0), rows) // a progress key not ours (negative) starts over
		}
		chunk := max(int64(exportChunkBytes)/rowBytes, 1)
		buf := make([]byte, chunk*rowBytes)
		fmt.Fprintf(s.errOut, "export %s %s (checksum %s): %d rows of %d bytes to %s, from row %d\n", *modelPath, *variable, sum, rows, rowBytes, *store, from)
		for r := from; r < rows; r += chunk {
			n := min(chunk, rows-r)
			part := buf[:n*rowBytes]
			if _, err := sec.ReadAt(part, r*rowBytes); err != nil {
				return inferr.Wrap(inferr.InputParsing, err, matches[0])
			}
			if err := st.PutRows(ctx, sum, *variable, r, part, int(rowBytes)); err != nil {
				return fmt.Errorf("%s: rows %d..%d (rerun to resume): %w", *modelPath, r, r+n-1, err)
			}
			if err := st.SetExportedRows(ctx, sum, *variable, r+n); err != nil {
				return err
			}
			fmt.Fprintf(s.errOut, "  %d/%d rows (%.0f%%)\n", r+n, rows, 100*float64(r+n)/float64(rows))
		}
		fmt.Fprintf(s.out, "exported %s %s: %d rows to %s under checksum %s\n", *modelPath, *variable, rows, *store, sum)
		return nil
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sectionCRC is an io.Writer that takes the CRC32C of the bytes at
// [off, off+n) of what is written to it from its start; pos counts them all.
type sectionCRC struct {
	off, n, pos int64
	sum         uint32
	seen        bool
}

func (c *sectionCRC) Write(p []byte) (int, error) {
	lo, hi := max(c.off-c.pos, 0), min(c.off+c.n-c.pos, int64(len(p)))
	if lo < hi {
		c.sum = crc32.Update(c.sum, castagnoli, p[lo:hi])
	}
	c.pos += int64(len(p))
	return len(p), nil
}

// tableRows is the row count and row size of t as a table export-variables
// can write: fixed-size elements, rows of at least one byte, all within
// the shard's possible offsets. ok is false for anything else (a crafted
// index's zero-byte or negative rows would divide by zero or allocate a
// negative buffer).
func tableRows(t *tensorflow.CheckpointTensor) (rows, rowBytes int64, ok bool) {
	if t.DType == "STRING" || len(t.Shape) == 0 || t.Shape[0] <= 0 || t.Offset < 0 || t.Bytes <= 0 || t.Bytes%t.Shape[0] != 0 {
		return 0, 0, false
	}
	return t.Shape[0], t.Bytes / t.Shape[0], true
}
