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

// A model is one .onnx file (modelFile): a tensor of it that declares
// ONNX external data names some other file, which ONNX Runtime would read
// into the model's weights: relative to the model's directory from disk,
// to the working directory from bytes (ONNX Runtime 1.30 refuses only
// absolute paths and paths leaving that directory; older libraries
// nothing), so that a file of the server's would come back in the model's
// outputs. refuseExternalData refuses such a model before ONNX Runtime
// sees it, wherever the tensor is: an initializer, a sparse one, a node's
// attribute, in a subgraph, a function or training info. (The weights
// file LoadDisk writes itself is made after this check.)

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

// refuseExternalData returns an error naming the first tensor of the
// model that declares external data, and its location.
func refuseExternalData(model []byte) error {
	return fields(model, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case modelGraph:
			return externalInGraph(val, 0)
		case modelFunctions:
			return fields(val, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
				if num == functionNode && typ == protowire.BytesType {
					return externalInNode(val, 0)
				}
				return nil
			})
		case modelTrainingInfo:
			return fields(val, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
				if (num == trainingInit || num == trainingAlgorithm) && typ == protowire.BytesType {
					return externalInGraph(val, 0)
				}
				return nil
			})
		}
		return nil
	})
}

func externalInGraph(g []byte, depth int) error {
	if depth > maxSubgraphNesting {
		return fmt.Errorf("subgraphs nested more than %d deep", maxSubgraphNesting)
	}
	return fields(g, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case graphNode:
			return externalInNode(val, depth)
		case graphInitializer:
			return checkTensor(val, "initializer")
		case graphSparseInitializer:
			return externalInSparse(val, "sparse initializer")
		}
		return nil
	})
}

func externalInNode(n []byte, depth int) error {
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
				return checkTensor(val, "attribute tensor")
			case attrSparseTensor, attrSparseTensors:
				return externalInSparse(val, "attribute sparse tensor")
			case attrGraph, attrGraphs:
				return externalInGraph(val, depth+1)
			}
			return nil
		})
	})
}

func externalInSparse(s []byte, what string) error {
	return fields(s, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if (num == sparseValues || num == sparseIndices) && typ == protowire.BytesType {
			return checkTensor(val, what)
		}
		return nil
	})
}

// checkTensor refuses a TensorProto whose data_location is EXTERNAL.
func checkTensor(t []byte, what string) error {
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
		return fmt.Errorf("%s %q is ONNX external data (location %q): a model is one .onnx file, external data is refused", what, name, location)
	}
	return nil
}
