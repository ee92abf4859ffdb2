package onnx

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// A model loaded from disk has its large initializers moved out of the
// ModelProto into a weights file, as ONNX external data, before ONNX Runtime
// opens it. ONNX Runtime parses an .onnx file into a ModelProto (one copy of
// every weight) and then copies each initializer into a tensor (a second),
// so a model whose weights are inline peaks at twice its size while it
// loads (measured: +230 MiB for a 114 MiB embedding table). External data
// at a page-aligned offset it maps instead, and the tensor is the mapping:
// the load adds nothing to the process's anonymous memory, and the
// weights' pages come from the page cache as they are used. The rewrite
// copies the weights file to file (copy_file_range): they never pass
// through this process's memory either.
const (
	// externalMin is the smallest raw_data moved out: small constants
	// stay inline (a mapping per tensor is not worth it).
	externalMin = 1 << 20
	// externalAlign aligns each tensor in the weights file: ONNX Runtime
	// maps external data in place when its offset is a multiple of the
	// allocation granularity (the page size on Linux; 64 KiB covers
	// every platform's).
	externalAlign = 64 << 10

	// ModelProto, GraphProto and TensorProto field numbers used here
	// (see modelinfo.go for the others).
	tensorRawData      = 9
	tensorExternalData = 13 // repeated StringStringEntryProto
	tensorDataLocation = 14 // 1 = EXTERNAL
	entryKey           = 1
	entryValue         = 2
)

// weightsName is the weights file's name, beside the rewritten model.
const weightsName = "weights.bin"

// rawField is one field of a protobuf message, as it stands in the message.
type rawField struct {
	num  protowire.Number
	typ  protowire.Type
	all  []byte // tag and value
	body []byte // a BytesType field's content
}

// rawFields splits a message into its fields.
func rawFields(b []byte) ([]rawField, error) {
	var out []rawField
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errTruncated
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, errTruncated
		}
		f := rawField{num: num, typ: typ, all: b[:n+m]}
		if typ == protowire.BytesType {
			f.body, _ = protowire.ConsumeBytes(b[n:])
		}
		out = append(out, f)
		b = b[n+m:]
	}
	return out, nil
}

// moved is a range of the source file that goes to the weights file.
type moved struct {
	from, to, n int64
}

// externalize writes, into dir, a copy of the model data (the mapped
// content of the file src) whose top-level initializers with raw_data of
// externalMin bytes or more are external data in dir/weights.bin, and
// returns the new model's path; "" when no initializer qualifies (load the
// original). Anything it does not understand it leaves as it is.
func externalize(data []byte, src *os.File, dir string) (string, error) {
	top, err := rawFields(data)
	if err != nil {
		return "", err
	}
	var moves []moved
	var weights int64
	// offset is where b, a part of data, starts in it.
	offset := func(b []byte) int64 {
		return int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(data))))
	}
	var out []byte
	for _, f := range top {
		if f.num != modelGraph || f.typ != protowire.BytesType {
			out = append(out, f.all...)
			continue
		}
		gfields, err := rawFields(f.body)
		if err != nil {
			return "", err
		}
		var graph []byte
		for _, g := range gfields {
			if g.num != graphInitializer || g.typ != protowire.BytesType {
				graph = append(graph, g.all...)
				continue
			}
			tfields, err := rawFields(g.body)
			if err != nil {
				return "", err
			}
			raw, ok := movable(tfields)
			if !ok {
				graph = append(graph, g.all...)
				continue
			}
			at := (weights + externalAlign - 1) / externalAlign * externalAlign
			moves = append(moves, moved{from: offset(raw), to: at, n: int64(len(raw))})
			weights = at + int64(len(raw))
			var t []byte
			for _, tf := range tfields {
				if tf.num != tensorRawData {
					t = append(t, tf.all...)
				}
			}
			for _, kv := range [][2]string{{"location", weightsName}, {"offset", strconv.FormatInt(at, 10)}, {"length", strconv.Itoa(len(raw))}} {
				var e []byte
				e = protowire.AppendString(protowire.AppendTag(e, entryKey, protowire.BytesType), kv[0])
				e = protowire.AppendString(protowire.AppendTag(e, entryValue, protowire.BytesType), kv[1])
				t = protowire.AppendBytes(protowire.AppendTag(t, tensorExternalData, protowire.BytesType), e)
			}
			t = protowire.AppendVarint(protowire.AppendTag(t, tensorDataLocation, protowire.VarintType), 1)
			graph = protowire.AppendBytes(protowire.AppendTag(graph, graphInitializer, protowire.BytesType), t)
		}
		out = protowire.AppendBytes(protowire.AppendTag(out, modelGraph, protowire.BytesType), graph)
	}
	if len(moves) == 0 {
		return "", nil
	}
	if err := copyRanges(src, filepath.Join(dir, weightsName), moves); err != nil {
		return "", err
	}
	model := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(model, out, 0o600); err != nil {
		return "", err
	}
	return model, nil
}

// movable returns a tensor's raw_data when it can move out: given once, at
// least externalMin bytes, and the tensor not external already.
func movable(tfields []rawField) ([]byte, bool) {
	var raw []byte
	seen := 0
	for _, tf := range tfields {
		switch tf.num {
		case tensorRawData:
			if tf.typ != protowire.BytesType {
				return nil, false
			}
			raw = tf.body
			seen++
		case tensorExternalData, tensorDataLocation:
			return nil, false
		}
	}
	return raw, seen == 1 && len(raw) >= externalMin
}

// copyRanges writes the ranges of src to a new file at dst, file to file.
func copyRanges(src *os.File, dst string, moves []moved) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	for _, m := range moves {
		if _, err := out.Seek(m.to, io.SeekStart); err != nil {
			out.Close()
			return err
		}
		if _, err := src.Seek(m.from, io.SeekStart); err != nil {
			out.Close()
			return err
		}
		// *os.File.ReadFrom of a LimitedReader over a file copies in
		// the kernel (copy_file_range, or sendfile).
		n, err := out.ReadFrom(&io.LimitedReader{R: src, N: m.n})
		if err == nil && n != m.n {
			err = fmt.Errorf("%s: %d of %d bytes copied: %w", src.Name(), n, m.n, io.ErrUnexpectedEOF)
		}
		if err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}
