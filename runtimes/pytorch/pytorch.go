//go:build pytorch && cgo

package pytorch

/*
#cgo CXXFLAGS: -std=c++17 -O2 -w -I/usr/include/torch/csrc/api/include
#cgo LDFLAGS: -ltorch_cpu -lc10
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// warmUpRuns: the profiling executor profiles the first run and optimises
// on the next ones; the third call runs the optimised plan.
const warmUpRuns = 3

// maxOutputElements bounds what one output tensor may hold before it is
// copied into Go memory (2 GiB of int64).
const maxOutputElements = 1 << 28

func init() {
	runtimes.Register("pytorch", Open)
}

// Open opens the libtorch backend with cfg's thread settings.
func Open(cfg driver.Config) (driver.Backend, error) {
	const maxThreads = 1024
	if cfg.NumIntraopThreads < 0 || cfg.NumIntraopThreads > maxThreads {
		return nil, fmt.Errorf("pytorch: num_intraop_threads %d out of range [0,%d]", cfg.NumIntraopThreads, maxThreads)
	}
	if cfg.NumInteropThreads < 0 || cfg.NumInteropThreads > maxThreads {
		return nil, fmt.Errorf("pytorch: num_interop_threads %d out of range [0,%d]", cfg.NumInteropThreads, maxThreads)
	}
	if err := takeError(C.pt_set_threads(C.int32_t(cfg.NumIntraopThreads), C.int32_t(cfg.NumInteropThreads))); err != nil {
		return nil, fmt.Errorf("pytorch: %w", err)
	}
	return &backend{}, nil
}

type backend struct{}

func (*backend) Close() error { return nil }

// Load loads, freezes and validates the model file among files.
func (*backend) Load(ctx context.Context, files driver.Files) (driver.Model, error) {
	name, data, err := modelFile(files)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := preflight(data); err != nil {
		return nil, fmt.Errorf("pytorch: %s: %w", name, err)
	}
	var cm *C.pt_model
	// data is a []byte (no Go pointers inside), read only during the call.
	err = takeError(C.pt_load(unsafe.Pointer(&data[0]), C.size_t(len(data)), &cm))
	return loaded(name, cm, err)
}

// LoadDisk is Load from the model file on disk (driver.DiskLoader): the
// file is checked (preflight) through a read-only mapping that is unmapped
// before libtorch reads it with pread (pt_load_fd), so that the file is
// never in this process's memory while libtorch's tensors are: the peak
// of a registration is the loaded model, not twice it.
func (*backend) LoadDisk(ctx context.Context, files driver.DiskFiles) (driver.Model, error) {
	names := make(driver.Files, len(files))
	for n := range files {
		names[n] = []byte{0} // modelFile picks by name; a non-empty placeholder
	}
	name, _, err := modelFile(names)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(files[name])
	if err != nil {
		return nil, fmt.Errorf("pytorch: %s: %w", name, err)
	}
	defer f.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, unmap, err := driver.MapFile(f)
	if err != nil {
		return nil, fmt.Errorf("pytorch: %s: %w", name, err)
	}
	if len(data) == 0 {
		unmap()
		return nil, fmt.Errorf("pytorch: %s: empty file", name)
	}
	size := len(data)
	err = preflight(data)
	unmap()
	if err != nil {
		return nil, fmt.Errorf("pytorch: %s: %w", name, err)
	}
	var cm *C.pt_model
	err = takeError(C.pt_load_fd(C.int(f.Fd()), C.size_t(size), &cm))
	runtime.KeepAlive(f)
	return loaded(name, cm, err)
}

// loaded makes the model of a pt_load or pt_load_fd.
func loaded(name string, cm *C.pt_model, err error) (driver.Model, error) {
	if err != nil {
		return nil, fmt.Errorf("pytorch: %s: %w", name, err)
	}
	if cm == nil {
		return nil, fmt.Errorf("pytorch: %s: load failed (out of memory?)", name)
	}
	m := &model{c: cm, sig: driver.Signature{Positional: true}}
	if n := int(C.pt_num_inputs(cm)); n >= 0 {
		m.sig.Inputs = make([]driver.TensorSpec, n)
		for i := range n {
			m.sig.Inputs[i] = driver.TensorSpec{Name: strings.ToValidUTF8(C.GoString(C.pt_input_name(cm, C.int32_t(i))), "\uFFFD")}
		}
	}
	m.findStates()
	return m, nil
}

// modelFile picks the TorchScript file: the only file, or the only *.pt or
// *.pth file among several.
func modelFile(files driver.Files) (string, []byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	pick := names
	if len(names) > 1 {
		pick = pick[:0:0]
		for _, n := range names {
			if ext := strings.ToLower(path.Ext(n)); ext == ".pt" || ext == ".pth" {
				pick = append(pick, n)
			}
		}
	}
	if len(pick) != 1 {
		return "", nil, fmt.Errorf("pytorch: a model is one TorchScript file (or exactly one *.pt among several files), got %d files: %s", len(names), strings.Join(names, ", "))
	}
	data := files[pick[0]]
	if len(data) == 0 {
		return "", nil, fmt.Errorf("pytorch: %s: empty file", pick[0])
	}
	return pick[0], data, nil
}

type model struct {
	c   *C.pt_model
	sig driver.Signature
	// states are the positions of the state arguments (sequence.go).
	states []int
}

func (m *model) Signature() driver.Signature { return m.sig }

func (m *model) WarmUpRuns() int { return warmUpRuns }

func (m *model) Close() error {
	if m.c != nil {
		C.pt_free_model(m.c)
		m.c = nil
	}
	return nil
}

// Predict runs forward() on inputs in order.
func (m *model) Predict(_ context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	if len(m.states) > 0 && m.absentStates(inputs) {
		// Outside a sequence, absent state arguments start from
		// initial_state().
		vals, err := m.initialState()
		if err != nil {
			return nil, err
		}
		inputs = m.withStates(inputs, vals)
	}
	// The input descriptors are Go memory holding pointers to the tensors'
	// data and shapes; cgo allows that only when those are pinned.
	var pinner runtime.Pinner
	defer pinner.Unpin()
	ins := make([]C.pt_input, len(inputs))
	for i, t := range inputs {
		if !takes(t.DType()) {
			return nil, fmt.Errorf("%w: pytorch: input %d (%q) is %s; the PyTorch runtime takes DOUBLE, FLOAT, INT8-64, BOOL, UINT8 and FP16", driver.ErrInvalidInput, i, t.Name, t.DType())
		}
		p := firstElement(t.Data)
		if p == nil {
			// runtimes never passes an empty tensor; C must not get nil.
			return nil, fmt.Errorf("%w: input %d (%q): no data", driver.ErrInvalidInput, i, t.Name)
		}
		pinner.Pin(p)
		in := C.pt_input{dtype: C.int32_t(t.DType()), ndim: C.int32_t(len(t.Shape)), data: p}
		if len(t.Shape) > 0 {
			pinner.Pin(&t.Shape[0])
			in.shape = (*C.int64_t)(unsafe.Pointer(&t.Shape[0]))
		}
		ins[i] = in
	}
	var insPtr *C.pt_input
	if len(ins) > 0 {
		insPtr = &ins[0]
	}
	var out C.pt_outputs
	var kind C.int32_t
	if err := takeError(C.pt_forward(m.c, insPtr, C.int32_t(len(ins)), &out, &kind)); err != nil {
		switch kind {
		case C.PT_ERR_INPUT:
			return nil, fmt.Errorf("%w: pytorch: converting inputs: %w", driver.ErrInvalidInput, err)
		case C.PT_ERR_OUTPUT:
			return nil, fmt.Errorf("%w: pytorch: unsupported output: %w", driver.ErrInvalidOutput, err)
		default:
			return nil, fmt.Errorf("pytorch: forward() failed: %w", shimError(summarize(err.Error())))
		}
	}
	defer C.pt_free_outputs(&out)
	return copyOutputs(&out)
}

// copyOutputs copies libtorch's output tensors into Go memory.
func copyOutputs(out *C.pt_outputs) ([]tensor.Tensor, error) {
	n := int(out.n)
	if n == 0 {
		return []tensor.Tensor{}, nil
	}
	views := unsafe.Slice(out.tensors, n)
	res := make([]tensor.Tensor, n)
	for i, v := range views {
		numel := int64(v.numel)
		if numel < 0 || numel > maxOutputElements {
			return nil, fmt.Errorf("%w: pytorch: output %d has %d elements (limit %d)", driver.ErrInvalidOutput, i, numel, maxOutputElements)
		}
		shape := make([]int64, int(v.ndim))
		if v.ndim > 0 {
			copy(shape, unsafe.Slice((*int64)(unsafe.Pointer(v.shape)), int(v.ndim)))
		}
		dt := tensor.DType(v.dtype)
		data := tensor.MakeData(dt, int(numel))
		if data == nil {
			return nil, fmt.Errorf("%w: pytorch: output %d has dtype code %d", driver.ErrInvalidOutput, i, int(v.dtype))
		}
		if numel > 0 {
			dst := unsafe.Slice((*byte)(firstElement(data)), int(numel)*dt.Size())
			copy(dst, unsafe.Slice((*byte)(v.data), len(dst)))
		}
		res[i] = tensor.Tensor{Name: strconv.Itoa(i), Shape: shape, Data: data}
	}
	return res, nil
}

// takes reports whether libtorch gets tensors of dtype d from this runtime:
// the contract's six, and BOOL, UINT8 and FP16 (libtorch has no UINT16-64
// in the versions Debian ships, and no string tensors).
func takes(d tensor.DType) bool {
	return d.Contract() || d == tensor.Bool || d == tensor.Uint8 || d == tensor.Half
}

// firstElement points at the first element of a tensor's data slice, or is
// nil for an empty or unsupported slice.
func firstElement(data any) unsafe.Pointer {
	switch d := data.(type) {
	case []bool:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	case []uint8:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	case []tensor.Float16:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	case []float64:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	case []float32:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	case []int8:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	case []int16:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	case []int32:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	case []int64:
		if len(d) > 0 {
			return unsafe.Pointer(&d[0])
		}
	}
	return nil
}

// summarize keeps the last line of a TorchScript interpreter error, the one
// that names the exception ("builtins.ValueError: ..."): the tracebacks
// before it quote the model's code and are too long for a response.
func summarize(msg string) string {
	if !strings.Contains(msg, "Traceback of TorchScript") {
		return msg
	}
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// takeError turns a shim error string into an error and frees it.
func takeError(s *C.char) error {
	if s == nil {
		return nil
	}
	defer C.pt_free_string(s)
	// libtorch quotes names and bytes of the model file, which need not be
	// UTF-8; the message must travel in a gRPC status.
	return shimError(strings.ToValidUTF8(C.GoString(s), "\uFFFD"))
}

type shimError string

func (e shimError) Error() string { return string(e) }
