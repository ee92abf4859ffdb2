package tensorflow

import (
	"errors"
	"testing"

	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// An external table's rows are gathered into the heap: a checkpoint index
// claiming rows larger than any in-memory tensor (a few bytes of index,
// no data, since the placeholder reads none) is refused at load, not
// allocated by the first lookup. A table of many small rows is fine.
func TestExternalPlaceholderRowBound(t *testing.T) {
	entry := func(dims ...int64) *cpb.BundleEntryProto {
		sh := &shpb.TensorShapeProto{}
		n := int64(4)
		for _, d := range dims {
			sh.Dim = append(sh.Dim, &shpb.TensorShapeProto_Dim{Size: d})
			n *= d
		}
		return &cpb.BundleEntryProto{Dtype: dtFloat, Shape: sh, Size: n}
	}
	if _, err := (&extTable{name: "huge_rows"}).placeholder(entry(2, 1<<36)); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("rows of 2^36 float32: %v, want ErrCorruptCheckpoint", err)
	}
	x := &extTable{name: "tall"}
	if _, err := x.placeholder(entry(1<<34, 16)); err != nil || x.rowBytes != 64 {
		t.Errorf("a [2^34, 16] table: %v (row %d bytes), want it served", err, x.rowBytes)
	}
}
