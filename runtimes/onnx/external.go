package onnx

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
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

// stagedModelName is the model's name in a directory staged for ONNX
// Runtime: no location can be it (externalFiles allows only the
// registration's other files, and a registration holds one .onnx file).
const stagedModelName = "model.onnx"

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
// externalMin bytes or more are external data in dir/weights (a name no
// external data of the model's own uses), and
// returns the new model's path; "" when no initializer qualifies (load the
// original). Anything it does not understand it leaves as it is.
func externalize(data []byte, src *os.File, dir, weights string) (string, error) {
	top, err := rawFields(data)
	if err != nil {
		return "", err
	}
	var moves []moved
	var size int64
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
			at := (size + externalAlign - 1) / externalAlign * externalAlign
			moves = append(moves, moved{from: offset(raw), to: at, n: int64(len(raw))})
			size = at + int64(len(raw))
			var t []byte
			for _, tf := range tfields {
				if tf.num != tensorRawData {
					t = append(t, tf.all...)
				}
			}
			for _, kv := range [][2]string{{"location", weights}, {"offset", strconv.FormatInt(at, 10)}, {"length", strconv.Itoa(len(raw))}} {
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
	if err := copyRanges(src, filepath.Join(dir, weights), moves); err != nil {
		return "", err
	}
	model := filepath.Join(dir, stagedModelName)
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

// A tensor that declares ONNX external data names another file, which
// ONNX Runtime reads into the model's weights, relative to the model's
// directory from disk and to the working directory from bytes (ONNX
// Runtime 1.30 refuses only absolute paths and paths leaving that
// directory; older libraries nothing). A model larger than protobuf's
// 2 GiB must keep its weights so, in files beside the .onnx file in the
// bucket; any other file would be one of the server's, coming back in the
// model's outputs. So externalData walks the whole model (initializers,
// sparse ones, nodes' attributes, subgraphs, functions, training info) and
// allows a location only when it names another file of the same
// registration (externalFiles); the load then lays out exactly the model
// and those files in a directory of its own for ONNX Runtime to read
// (stageModel). Everything else is refused before ONNX Runtime sees it.
// (The weights file LoadDisk writes itself is made after this check.)

// Field numbers of onnx.proto, for the walk (see also modelinfo.go).
const (
	modelTrainingInfo  = 20 // ModelProto.training_info (TrainingInfoProto)
	modelFunctions     = 25 // ModelProto.functions (FunctionProto)
	trainingInit       = 1  // TrainingInfoProto.initialization (GraphProto)
	trainingAlgorithm  = 2  // TrainingInfoProto.algorithm (GraphProto)
	functionNode       = 7  // FunctionProto.node
	nodeAttribute      = 5  // NodeProto.attribute (AttributeProto)
	attrTensor         = 5  // AttributeProto.t
	attrGraph          = 6  // AttributeProto.g
	attrTensors        = 10 // AttributeProto.tensors
	attrGraphs         = 11 // AttributeProto.graphs
	attrSparseTensor   = 22 // AttributeProto.sparse_tensor
	attrSparseTensors  = 23 // AttributeProto.sparse_tensors
	sparseIndices      = 2  // SparseTensorProto.indices
	dataLocationExtern = 1  // TensorProto.DataLocation EXTERNAL
	maxSubgraphNesting = 64 // protobuf's own parsers stop at 100 nested messages
)

// externalData calls visit for every tensor of the model that declares
// external data (what it is, its name, its location) and returns the
// first error, visit's or the walk's.
func externalData(model []byte, visit func(what, name, location string) error) error {
	w := externalWalk{visit}
	return w.model(model)
}

// externalWalk is the walk of externalData.
type externalWalk struct {
	visit func(what, name, location string) error
}

func (w externalWalk) model(model []byte) error {
	return fields(model, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case modelGraph:
			return w.graph(val, 0)
		case modelFunctions:
			return fields(val, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
				if num == functionNode && typ == protowire.BytesType {
					return w.node(val, 0)
				}
				return nil
			})
		case modelTrainingInfo:
			return fields(val, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
				if (num == trainingInit || num == trainingAlgorithm) && typ == protowire.BytesType {
					return w.graph(val, 0)
				}
				return nil
			})
		}
		return nil
	})
}

func (w externalWalk) graph(g []byte, depth int) error {
	if depth > maxSubgraphNesting {
		return fmt.Errorf("subgraphs nested more than %d deep", maxSubgraphNesting)
	}
	return fields(g, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case graphNode:
			return w.node(val, depth)
		case graphInitializer:
			return w.tensor(val, "initializer")
		case graphSparseInitializer:
			return w.sparse(val, "sparse initializer")
		}
		return nil
	})
}

func (w externalWalk) node(n []byte, depth int) error {
	return fields(n, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if num != nodeAttribute || typ != protowire.BytesType {
			return nil
		}
		return fields(val, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case attrTensor, attrTensors:
				return w.tensor(val, "attribute tensor")
			case attrSparseTensor, attrSparseTensors:
				return w.sparse(val, "attribute sparse tensor")
			case attrGraph, attrGraphs:
				return w.graph(val, depth+1)
			}
			return nil
		})
	})
}

func (w externalWalk) sparse(s []byte, what string) error {
	return fields(s, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if (num == sparseValues || num == sparseIndices) && typ == protowire.BytesType {
			return w.tensor(val, what)
		}
		return nil
	})
}

// tensor visits a TensorProto whose data_location is EXTERNAL.
func (w externalWalk) tensor(t []byte, what string) error {
	var name, location string
	external := false
	err := fields(t, func(num protowire.Number, typ protowire.Type, val []byte, v uint64) error {
		switch {
		case num == tensorName && typ == protowire.BytesType:
			name = string(val)
		case num == tensorDataLocation && typ == protowire.VarintType && v == dataLocationExtern:
			external = true
		case num == tensorExternalData && typ == protowire.BytesType:
			var key, value string
			if err := fields(val, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
				if typ == protowire.BytesType && num == entryKey {
					key = string(val)
				} else if typ == protowire.BytesType && num == entryValue {
					value = string(val)
				}
				return nil
			}); err != nil {
				return err
			}
			if key == "location" {
				location = value
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if external {
		return w.visit(what, name, location)
	}
	return nil
}

// externalFiles checks the external data of the model file modelPath (a
// slash-separated path of the registration, whose file names are files)
// and returns the files it names: location (as the model writes it) ->
// the registration's path of that file. A location must be a local,
// slash-separated path that, taken from modelPath's directory as ONNX
// Runtime takes it, is another file of the registration; the error names
// the tensor and the location otherwise.
func externalFiles(model []byte, modelPath string, files func(path string) bool) (map[string]string, error) {
	var refs map[string]string
	err := externalData(model, func(what, name, location string) error {
		if _, ok := refs[location]; ok {
			return nil
		}
		if location == "" || strings.Contains(location, "\\") || !filepath.IsLocal(filepath.FromSlash(location)) || location != path.Clean(location) {
			return fmt.Errorf("%s %q is ONNX external data at location %q: want a relative path inside the model's directory, naming a file of the model", what, name, location)
		}
		target := path.Join(path.Dir(modelPath), location)
		if target == modelPath || !files(target) {
			return fmt.Errorf("%s %q is ONNX external data at location %q (%s), which is not a file of the model: the external data must come with the model, beside its .onnx file", what, name, location, target)
		}
		if refs == nil {
			refs = make(map[string]string)
		}
		refs[location] = target
		return nil
	})
	return refs, err
}
